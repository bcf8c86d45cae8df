"""`envpin probe --image`: the probe inside any image through the engine, GPUs only when the host has them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_envpin
from tests.docker.conftest import push_with_env

pytestmark = pytest.mark.docker


def test_probe_an_image_without_gpus(stand_in_image: str, tmp_path: Path) -> None:
    res = run_envpin("probe", "--image", stand_in_image, "--out", str(tmp_path / "reports"), cwd=tmp_path)
    assert res.code == 0, res.stderr
    written = sorted((tmp_path / "reports").iterdir())
    assert [p.suffix for p in written] == [".json", ".md"]
    assert [line.split()[-1] for line in res.stdout.splitlines()] == [str(p) for p in written]
    report = json.loads(written[0].read_text())
    assert report["fingerprint"].startswith("sha256:") and report["python"]["version"]["value"].startswith("3.11")
    # This host has no NVIDIA runtime: said, and the container still ran (unlike compose.yaml's GPU request).
    assert "without GPUs: this host has no NVIDIA container runtime" in res.stderr


def test_a_failing_probe_fails_the_command(docker_client: Any, stand_in_image: str, tmp_path: Path) -> None:
    broken = push_with_env(docker_client, stand_in_image, "envpin-probe-image-test/broken", "1",
                           {"PATH": "/nonexistent"}, "probe-image")  # no python3 to be found
    res = run_envpin("probe", "--image", broken, "--out", str(tmp_path / "reports"))
    assert res.code == 1 and "the probe failed inside" in res.stderr and "(exit 127)" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr and list((tmp_path / "reports").iterdir()) == []


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--gpus", "all"], "--gpus all, but this host has no NVIDIA container runtime"),
        (["--gpus", "some"], "'some' is not one of 'auto', 'all', 'none'"),
        (["-o", "x.json"], "--image writes both reports into --out"),
    ],
)
def test_refusals(stand_in_image: str, tmp_path: Path, args: list[str], fragment: str) -> None:
    res = run_envpin("probe", "--image", stand_in_image, *args, "--out", str(tmp_path / "r"))
    lines = res.stderr.strip().splitlines()
    assert res.code == 2 and lines[0].startswith("error:") and fragment in lines[0], res.stderr
    assert lines[-1].startswith("hint:") and not (tmp_path / "r").exists()
