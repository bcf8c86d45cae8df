"""`envpin lock`: resolution inside the target image, base packages as constraints, build with hashes."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from envpin.environment.requirements import read_lock
from tests.conftest import run_envpin


@pytest.fixture(scope="module")
def base_with_six(docker_client, local_registry: str, stand_in_image: str) -> str:  # type: ignore[no-untyped-def]
    """The stand-in plus six==1.16.0, playing the part of a package NVIDIA ships in the image; pushed to a
    test-only repository of the local registry, so `build` can pin it by digest."""
    ref = f"{local_registry}/envpin-test/base-with-six:1"
    dockerfile = f"FROM {stand_in_image}\nRUN python3 -m pip install --no-cache-dir six==1.16.0\n".encode()
    docker_client.images.build(fileobj=io.BytesIO(dockerfile), tag=ref, rm=True)
    for event in docker_client.images.push(
        f"{local_registry}/envpin-test/base-with-six", tag="1", stream=True, decode=True
    ):
        assert "error" not in event, event
    return ref


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


def test_host_resolution_locks_what_the_image_installs(
    docker_client,
    base_with_six: str,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    """--resolver host (what auto picks for the Python 3.6 images): uv resolves on the host for the image's
    Python and the wheel tags its own pip reports; six stays the image's; the lock installs with
    --require-hashes in the image."""
    src = tmp_path / "requirements.in"
    src.write_text("python-dateutil==2.9.0.post0\ntomli-w==1.0.0\n")
    res = run_envpin("lock", str(src), "--ngc", "20.02-tf2-py3", "--base-image", base_with_six, "--resolver", "host")
    assert res.code == 0, res.stderr
    assert "resolved on the host with uv" in res.stderr
    lock = tmp_path / "requirements.lock"
    assert "on the host for " + base_with_six in lock.read_text()
    reqs = {r.key: r for r in read_lock(lock)}
    assert set(reqs) == {"python-dateutil", "tomli-w"}, "six is in the base image and must not be locked"
    out = tmp_path / "env"
    built = run_envpin(
        "build", "--ngc", "20.02-tf2-py3", "--base-image", base_with_six, "--requirements", str(lock), "--out", str(out)
    )
    assert built.code == 0, built.stderr
    shown = docker_client.containers.run(
        built.stdout.strip(), ["python3", "-m", "pip", "list", "--format", "json"], remove=True
    ).decode()
    versions = {re.sub(r"[-_.]+", "-", d["name"]).lower(): d["version"] for d in json.loads(shown)}
    assert versions["python-dateutil"] == "2.9.0.post0" and versions["tomli-w"] == "1.0.0"
    assert versions["six"] == "1.16.0"


def test_the_image_resolver_refuses_nothing_it_can_run(base_with_six: str, tmp_path: Path) -> None:
    """The stand-in's Python 3.11 runs the in-image pip: --resolver image and auto both resolve there."""
    src = tmp_path / "requirements.in"
    src.write_text("tomli-w==1.0.0\n")
    res = run_envpin("lock", str(src), "--ngc", "20.02-tf2-py3", "--base-image", base_with_six, "--resolver", "image")
    assert res.code == 0 and "resolved inside the image" in res.stderr, res.stderr


@pytest.mark.parametrize("content, fragment", [("-r other.txt\n", "not supported"), ("\n# nothing\n", "no packages")])
def test_bad_requirements_in(content: str, fragment: str, tmp_path: Path) -> None:
    src = tmp_path / "requirements.in"
    src.write_text(content)
    res = run_envpin("lock", str(src), "--ngc", "20.02-tf2-py3", "--base-image", "127.0.0.1:5000/x:1")
    assert res.code == 2 and fragment in res.stderr


@pytest.mark.pypi
@pytest.mark.parametrize(
    ("pip", "newest", "absent"),
    [
        (None, "manylinux_2_31_x86_64", None),  # the stand-in's own pip 20.3.4: pip._internal.utils.compatibility_tags
        ("19.3.1", "manylinux2014_x86_64", "manylinux_2_17_x86_64"),  # pip._internal.pep425tags, Tag objects
        ("9.0.3", "manylinux1_x86_64", "manylinux2010_x86_64"),  # pip.pep425tags, tuples
    ],
)
def test_the_image_says_which_wheels_its_pip_installs(
    docker_client,
    stand_in_image_bullseye: str,  # type: ignore[no-untyped-def]
    tmp_path: Path,
    pip: str | None,
    newest: str,
    absent: str | None,
) -> None:
    """The tag list comes from the image's own pip, whichever of its three internal APIs it has: the pip
    wheel given runs from the zip on PYTHONPATH in the bullseye stand-in (Python 3.9, glibc 2.31)."""
    import subprocess
    import sys

    from envpin.environment import resolve
    from envpin.environment.payload import PAYLOAD_NAME, payload

    (tmp_path / PAYLOAD_NAME).write_bytes(payload())
    env = {}
    if pip is not None:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "--only-binary=:all:",
                f"pip=={pip}",
                "-d",
                str(tmp_path),
            ],
            check=True,
            capture_output=True,
            timeout=300,
        )
        (wheel,) = tmp_path.glob("pip-*.whl")
        env["PYTHONPATH"] = f"/work/{wheel.name}"
    out = docker_client.containers.run(
        stand_in_image_bullseye,
        ["python3", "-c", resolve._LIST],
        environment=env,
        volumes={str(tmp_path): {"bind": "/work", "mode": "ro"}},
        remove=True,
        stderr=False,
    ).decode()
    tags = json.loads(out.strip().splitlines()[-1])["tags"]
    assert tags[0] == "cp39-cp39-" + newest and "py3-none-any" in tags
    assert absent is None or not any(t.endswith(absent) for t in tags)
    expected = "x86_64-manylinux_2_31" if pip is None else "x86_64-manylinux_2_17"
    assert resolve.manylinux_platform(tuple(tags)) == expected
