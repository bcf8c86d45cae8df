"""`envpin lock`: resolution inside the target image, base packages as constraints, build with hashes."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from envpin.requirements import read_lock
from tests.conftest import run_envpin

pytestmark = pytest.mark.docker
BASE_WITH_SIX = "envpin-test/base-with-six:1"


@pytest.fixture(scope="module")
def base_with_six(docker_client, stand_in_image: str) -> str:  # type: ignore[no-untyped-def]
    """The stand-in plus six==1.16.0, playing the part of a package NVIDIA ships in the image."""
    dockerfile = f"FROM {stand_in_image}\nRUN python3 -m pip install --no-cache-dir six==1.16.0\n".encode()
    docker_client.images.build(fileobj=io.BytesIO(dockerfile), tag=BASE_WITH_SIX, rm=True)
    return BASE_WITH_SIX


def test_lock_keeps_base_packages_and_hashes_the_rest(base_with_six: str, tmp_path: Path) -> None:
    src = tmp_path / "requirements.in"
    src.write_text("python-dateutil==2.9.0.post0  # needs six>=1.5, which the base already has\n")
    res = run_envpin("lock", str(src), "--ngc", "20.02-tf2-py3", "--base-image", base_with_six)
    assert res.code == 0, res.stderr
    lock = tmp_path / "requirements.lock"
    reqs = {r.key: r for r in read_lock(lock)}
    assert set(reqs) == {"python-dateutil"}, "six is in the base image and must not be locked or replaced"
    assert reqs["python-dateutil"].version == "2.9.0.post0"
    assert all(h.startswith("sha256:") and len(h) == 71 for h in reqs["python-dateutil"].hashes)
    assert "for Python 3.11" in lock.read_text()


def test_lock_refuses_to_replace_a_base_package(base_with_six: str, tmp_path: Path) -> None:
    src = tmp_path / "requirements.in"
    src.write_text("six>=1.17\n")
    res = run_envpin("lock", str(src), "--ngc", "20.02-tf2-py3", "--base-image", base_with_six)
    assert res.code == 2 and "cannot be resolved" in res.stderr and "six" in res.stderr
    assert not (tmp_path / "requirements.lock").exists()


def test_locked_requirements_build(docker_client, stand_in_image: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "requirements.in"
    src.write_text("tomli-w==1.0.0\n")
    assert run_envpin("lock", str(src), "--ngc", "20.02-tf2-py3", "--base-image", stand_in_image).code == 0
    out = tmp_path / "env"
    res = run_envpin(
        "build",
        "--ngc",
        "20.02-tf2-py3",
        "--base-image",
        stand_in_image,
        "--requirements",
        str(tmp_path / "requirements.lock"),
        "--out",
        str(out),
    )
    assert res.code == 0, res.stderr
    assert "--require-hashes --no-deps" in (out / "Dockerfile").read_text()
    tag = res.stdout.strip()
    shown = docker_client.containers.run(tag, ["python3", "-m", "pip", "show", "tomli-w"], remove=True).decode()
    assert "Version: 1.0.0" in shown


@pytest.mark.parametrize("content, fragment", [("-r other.txt\n", "not supported"), ("\n# nothing\n", "no packages")])
def test_bad_requirements_in(content: str, fragment: str, tmp_path: Path) -> None:
    src = tmp_path / "requirements.in"
    src.write_text(content)
    res = run_envpin("lock", str(src), "--ngc", "20.02-tf2-py3", "--base-image", "127.0.0.1:5000/x:1")
    assert res.code == 2 and fragment in res.stderr
