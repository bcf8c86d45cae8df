"""The Docker tier: every test here gets the marker `docker` from its folder (tests/conftest.py)."""

from tests.engines import (  # noqa: F401 (fixtures, registered by being here)
    docker_client,
    docker_engine,
    local_registry,
    stand_in_image,
    stand_in_image_bullseye,
    stock_stand_in_image,
)
