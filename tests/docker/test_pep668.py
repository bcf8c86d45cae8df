"""A base whose Python is externally managed (PEP 668), as Debian 12 and Ubuntu 24.04 ship it: envpin locks
against it and installs the locked requirements, and the image's users keep the protection."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_envpin
from tests.engines import push_with_env

_PIP = ["python3", "-m", "pip", "install", "--no-deps", "--dry-run", "--disable-pip-version-check", "six"]


@pytest.fixture(scope="module")
def pep668_base(docker_client: Any, stand_in_image: str) -> str:
    """The stand-in (Debian 12: /usr/lib/python3.11/EXTERNALLY-MANAGED) without its override: an empty
    PIP_BREAK_SYSTEM_PACKAGES makes pip obey the marker, as on a stock Debian 12 or Ubuntu 24.04 base."""
    return push_with_env(
        docker_client,
        stand_in_image,
        "envpin-pep668-test/nvidia/tensorflow",
        "20.02-tf2-py3",
        {"PIP_BREAK_SYSTEM_PACKAGES": ""},
        "pep668",
    )


def _pip_refuses(docker_client: Any, image: str) -> bool:
    container = docker_client.containers.run(image, _PIP, detach=True, entrypoint=[])
    try:
        code = container.wait(timeout=120)["StatusCode"]
        logs = container.logs().decode("utf-8", "replace")
    finally:
        container.remove(force=True)
    return code != 0 and "externally-managed-environment" in logs


def test_lock_and_build_on_an_externally_managed_base(docker_client: Any, pep668_base: str, tmp_path: Path) -> None:
    assert _pip_refuses(docker_client, pep668_base)  # the control: this base really refuses pip
    src = tmp_path / "requirements.in"
    src.write_text("six==1.16.0\n")
    res = run_envpin("lock", str(src), "--ngc", "20.02-tf2-py3", "--base-image", pep668_base)
    assert res.code == 0, res.stderr
    locked = tmp_path / "requirements.lock"
    assert "six==1.16.0" in locked.read_text() and "--hash=sha256:" in locked.read_text()
    out = tmp_path / "env"
    res = run_envpin(
        "build",
        "--ngc",
        "20.02-tf2-py3",
        "--base-image",
        pep668_base,
        "--requirements",
        str(locked),
        "--out",
        str(out),
        "--engine",
        "docker",
    )
    assert res.code == 0, res.stderr
    from envpin.environment import lockfile
    from envpin.image import buildstate

    record = buildstate.load(lockfile.read(out / "envpin.lock").inputs_hash)
    assert record is not None
    got = docker_client.containers.run(
        record.image_id, ["python3", "-c", "import six; print(six.__version__)"], remove=True, entrypoint=[]
    )
    assert got.decode().strip() == "1.16.0"
    # The override was for envpin's one install step only: a later `pip install` in the image is refused.
    assert _pip_refuses(docker_client, record.image_id)
