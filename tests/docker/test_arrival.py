"""The arrival workflow: a teammate clones, runs `envpin build` with no flags, probes, and verifies."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from envpin import lockfile
from tests.conftest import REPO, run_envpin

pytestmark = pytest.mark.docker


def _checkout(dest: Path) -> Path:
    """What a clone of a team repository using envpin holds: compose files and envpin's probe."""
    dest.mkdir()
    for name in ("compose.yaml", "compose.cpu.yaml"):
        shutil.copy(REPO / name, dest / name)
    shutil.copytree(REPO / "envpin", dest / "envpin", ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def _compose_probe(cwd: Path, image: str, **env: str) -> Path:
    before = set((cwd / "reports").glob("*.json")) if (cwd / "reports").exists() else set()
    proc = subprocess.run(
        ["docker", "compose", "-f", "compose.yaml", "-f", "compose.cpu.yaml", "run", "--rm", "probe"],
        cwd=cwd, env={**os.environ, "ENVPIN_IMAGE": image, **env}, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (new,) = set((cwd / "reports").glob("*.json")) - before
    return new


def test_arrival(docker_client, stand_in_image: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ref = _checkout(tmp_path / "reference")
    built = run_envpin("build", "--ngc", "20.02-tf2-py3", "--base-image", stand_in_image, cwd=ref)
    assert built.code == 0, built.stderr
    tag = built.stdout.strip()
    lock_rel = Path("images/20.02-tf2/envpin.lock")
    report = _compose_probe(ref, tag)
    rec = run_envpin("verify", "--lock", str(lock_rel), "--report", str(report), "--record", cwd=ref)
    assert rec.code == 0, rec.stderr
    assert "expected fingerprint" in rec.stderr
    assert run_envpin("lock", "--check", cwd=ref).code == 0

    # The teammate's clone: the committed files only (no build log, no reports), and no image yet.
    mate = tmp_path / "teammate"
    shutil.copytree(ref, mate, ignore=shutil.ignore_patterns("build.log", "reports", "__pycache__"))
    docker_client.images.remove(tag, force=True)
    again = run_envpin("build", cwd=mate)
    assert again.code == 0, again.stderr
    assert again.stdout.strip() == tag, "same inputs must give the same image tag"
    lock = lockfile.read(mate / lock_rel)
    assert lock["expected"] == lockfile.read(ref / lock_rel)["expected"]

    same = run_envpin("verify", "--lock", str(lock_rel), "--report", str(_compose_probe(mate, tag)), cwd=mate)
    assert same.code == 0, same.stderr
    assert same.stderr.splitlines()[0] in ("identical", "identical except informational differences")

    threads = _compose_probe(mate, tag, OMP_NUM_THREADS="3", TF_ENABLE_ONEDNN_OPTS="0")
    res = run_envpin("verify", "--lock", str(lock_rel), "--report", str(threads), "--json", cwd=mate)
    assert res.code == 1 and res.stderr.splitlines()[0] == "2 breaking differences"
    keys = {d["key"] for d in json.loads(res.stdout)["differences"] if d["severity"] == "breaking"}
    assert keys == {"env.OMP_NUM_THREADS", "env.TF_ENABLE_ONEDNN_OPTS"}


def test_flagless_build_needs_a_lock(tmp_path: Path) -> None:
    res = run_envpin("build", cwd=tmp_path)
    assert res.code == 2 and "no --ngc given and no envpin.lock" in res.stderr
