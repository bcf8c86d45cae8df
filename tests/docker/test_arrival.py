"""The arrival workflow: a teammate clones, runs `envpin build` with no flags, probes, and verifies."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO, run_envpin


def _git(cwd: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return proc.stdout


def _team_repo(dest: Path) -> Path:
    """A team repository using envpin: the compose files and nothing of envpin's sources."""
    dest.mkdir()
    for name in ("compose.yaml", "compose.cpu.yaml"):
        shutil.copy(REPO / name, dest / name)
    (dest / ".gitignore").write_text("reports/\n")
    _git(dest, "init", "-q")
    return dest


def _compose_probe(cwd: Path, image: str, **env: str) -> Path:
    before = set((cwd / "reports").glob("*.json")) if (cwd / "reports").exists() else set()
    proc = subprocess.run(
        ["docker", "compose", "-f", "compose.yaml", "-f", "compose.cpu.yaml", "run", "--rm", "probe"],
        cwd=cwd,
        env={**os.environ, "ENVPIN_IMAGE": image, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (new,) = set((cwd / "reports").glob("*.json")) - before
    return new


def _verify(cwd: Path, lock: Path, report: Path, *extra: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    res = run_envpin("verify", "--lock", str(lock), "--report", str(report), "--json", *extra, cwd=cwd)
    assert res.code in (0, 1), res.stderr
    return res.code, json.loads(res.stdout)


def test_arrival(docker_client, stand_in_image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    ref = _team_repo(tmp_path / "reference")
    built = run_envpin("build", "--ngc", "20.02-tf2-py3", "--base-image", stand_in_image, cwd=ref)
    assert built.code == 0, built.stderr
    tag = built.stdout.strip()
    lock_rel = Path("images/20.02-tf2/envpin.lock")
    report = _compose_probe(ref, tag)
    rec = run_envpin("verify", "--lock", str(lock_rel), "--report", str(report), "--record", cwd=ref)
    assert rec.code == 0, rec.stderr
    assert "expected fingerprint" in rec.stdout + rec.stderr
    assert run_envpin("lock", "--check", cwd=ref).code == 0
    _git(ref, "add", "-A")
    _git(ref, "commit", "-q", "-m", "pin the training environment")
    committed = sorted(_git(ref, "ls-files").split())
    assert committed == [
        ".gitignore",
        "compose.cpu.yaml",
        "compose.yaml",
        "images/20.02-tf2/.dockerignore",
        "images/20.02-tf2/Dockerfile",
        "images/20.02-tf2/envpin.lock",
        "images/20.02-tf2/envpin.pyz",
        "images/20.02-tf2/plan.json",
        "images/20.02-tf2/sbom.cdx.json",  # nothing machine-local in it: the teammate's build writes the same
    ]

    # The teammate: a clean clone, another machine's state (nothing built there), no image yet.
    mate = tmp_path / "teammate"
    _git(tmp_path, "clone", "-q", str(ref), str(mate))
    monkeypatch.setenv("ENVPIN_STATE_DIR", str(tmp_path / "teammate-state"))
    docker_client.images.remove(tag, force=True)
    again = run_envpin("build", cwd=mate)
    assert again.code == 0, again.stderr
    assert "up to date" not in again.stderr, "nothing was built on this machine yet"
    assert again.stdout.strip() == tag, "same inputs must give the same image tag"
    assert _git(mate, "status", "--porcelain") == "", "a teammate's build must leave the clone clean"

    code, doc = _verify(mate, lock_rel, _compose_probe(mate, tag))
    assert code == 0 and doc["verdict"] in ("identical", "identical except informational differences"), doc
    threads = _compose_probe(mate, tag, OMP_NUM_THREADS="3", TF_ENABLE_ONEDNN_OPTS="0")
    code, doc = _verify(mate, lock_rel, threads)
    assert code == 1 and doc["verdict"] == "2 breaking differences"
    keys = {d["key"] for d in doc["differences"] if d["severity"] == "breaking"}
    assert keys == {"env.OMP_NUM_THREADS", "env.TF_ENABLE_ONEDNN_OPTS"}
    assert _git(mate, "status", "--porcelain") == ""


def test_flagless_build_needs_a_lock(tmp_path: Path) -> None:
    res = run_envpin("build", cwd=tmp_path)
    assert res.code == 2 and "no --ngc given and no envpin.lock" in res.stderr
