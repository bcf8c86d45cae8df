"""`docker compose run --rm probe` end to end on the CPU stand-in image."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO, run_envpin


def test_compose_probe_writes_reports(stand_in_image: str, tmp_path: Path) -> None:
    if shutil.which("docker") is None:
        pytest.skip("the docker CLI is not installed (bash scripts/services.sh install)")
    for name in ("compose.yaml", "compose.cpu.yaml"):
        shutil.copy(REPO / name, tmp_path / name)
    # What a team repository holds: an environment folder, whose envpin.pyz the probe service mounts.
    assert run_envpin("render", "--ngc", "20.02", "--tf", "2.1", cwd=tmp_path).code == 0
    env = {**os.environ, "ENVPIN_IMAGE": stand_in_image, "TF_ENABLE_ONEDNN_OPTS": "0"}
    for args in ("", "--no-selftest"):  # two runs: report names must not collide
        env["ENVPIN_PROBE_ARGS"] = args
        proc = subprocess.run(
            ["docker", "compose", "-f", "compose.yaml", "-f", "compose.cpu.yaml", "run", "--rm", "probe"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
    reports = sorted((tmp_path / "reports").iterdir())
    jsons = [p for p in reports if p.suffix == ".json"]
    assert len(jsons) == 2 and len([p for p in reports if p.suffix == ".md"]) == 2
    first, second = (json.loads(p.read_text()) for p in jsons)
    if first["probe"]["options"]["value"]["selftest"] is False:
        first, second = second, first
    report = first
    # The service shares the host's UTS namespace: reports carry this machine's name, not the container ID.
    assert all(p.name.startswith(socket.gethostname() + "-") for p in reports), reports
    assert report["host"]["hostname"]["value"] == socket.gethostname()
    assert report["fingerprint"].startswith("sha256:")
    # The stand-in has no TensorFlow: the default self-test says why it did not run, and exit stays 0.
    assert report["selftest"]["skipped"].startswith("TensorFlow is not installed for /usr/bin/python3")
    assert "selftest" not in second and second["probe"]["options"]["value"]["selftest"] is False
    text = json.dumps(report)
    assert "20.02-tf2" in text  # the stand-in's NVIDIA_TENSORFLOW_VERSION was read inside the container
    assert '"TF_ENABLE_ONEDNN_OPTS"' in text


def test_compose_without_the_archive_fails_and_creates_nothing(stand_in_image: str, tmp_path: Path) -> None:
    if shutil.which("docker") is None:
        pytest.skip("the docker CLI is not installed (bash scripts/services.sh install)")
    for name in ("compose.yaml", "compose.cpu.yaml"):
        shutil.copy(REPO / name, tmp_path / name)
    proc = subprocess.run(
        ["docker", "compose", "-f", "compose.yaml", "-f", "compose.cpu.yaml", "run", "--rm", "probe"],
        cwd=tmp_path,
        env={**os.environ, "ENVPIN_IMAGE": stand_in_image},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode != 0 and "envpin.pyz" in proc.stderr
    assert not (tmp_path / "images").exists(), "a missing archive must not become an empty folder"


def test_compose_gpu_service_requests_all_gpus() -> None:
    text = (REPO / "compose.yaml").read_text()
    for needle in ("driver: nvidia", "count: all", "capabilities: [gpu]", "${ENVPIN_IMAGE:-", "./reports:/reports"):
        assert needle in text


def test_compose_without_the_cpu_override_fails_where_there_is_no_nvidia_runtime(
    stand_in_image: str, tmp_path: Path
) -> None:
    """What the README and compose.yaml say: compose.yaml alone asks for GPUs through the NVIDIA runtime, and on
    a host without it `docker compose run` says so and exits non-zero (1), writing nothing."""
    if shutil.which("docker") is None:
        pytest.skip("the docker CLI is not installed (bash scripts/services.sh install)")
    info = subprocess.run(
        ["docker", "info", "--format", "{{json .Runtimes}}"], capture_output=True, text=True, timeout=60
    )
    if "nvidia" in info.stdout:
        pytest.skip("this host has the NVIDIA container runtime: compose.yaml alone can start here")
    for name in ("compose.yaml", "compose.cpu.yaml"):
        shutil.copy(REPO / name, tmp_path / name)
    assert run_envpin("render", "--ngc", "20.02", "--tf", "2.1", cwd=tmp_path).code == 0
    proc = subprocess.run(
        ["docker", "compose", "run", "--rm", "probe"],
        cwd=tmp_path,
        env={**os.environ, "ENVPIN_IMAGE": stand_in_image, "ENVPIN_PROBE_ARGS": "--no-selftest"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert 'could not select device driver "nvidia"' in proc.stderr
    assert not (tmp_path / "reports").exists() or not list((tmp_path / "reports").iterdir())
