"""The podman tier: every test here gets the marker `podman` from its folder (tests/conftest.py); the stand-in
images come from the local registry the Docker tier uses too."""

from tests.engines import local_registry, stand_in_image  # noqa: F401 (fixtures, registered by being here)
