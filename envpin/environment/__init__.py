"""The environment folder: the plan (catalog entry + recipe + options), what it renders (Dockerfile,
Apptainer definition, .dockerignore, the in-image payload envpin.pyz), the hashed requirements and their
resolution, and the envpin.lock file that records it all for the team."""
