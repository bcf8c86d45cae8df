"""Fleets: many probe reports aggregated into classes and outliers, where they come from (folders,
Kubernetes logs, Slurm jobs), the Kubernetes probe manifest and the Slurm collector with its node-side task."""
