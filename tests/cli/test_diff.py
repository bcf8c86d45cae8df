"""envpin diff between reports of two separate processes: what a teammate's second run gives."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_envpin


def _probe(path: Path) -> Path:
    res = run_envpin("probe", "-o", str(path), env={"OMP_NUM_THREADS": "2", "TF_ENABLE_ONEDNN_OPTS": "1"})
    assert res.code == 0, res.stderr
    assert res.stderr == "" and "fingerprint sha256:" in res.stdout  # the report went to a file
    return path


def test_two_runs_of_one_environment_differ_only_in_volatile_fields(tmp_path: Path) -> None:
    a, b = _probe(tmp_path / "a.json"), _probe(tmp_path / "b.json")
    res = run_envpin("diff", str(a), str(b), "--json")
    assert res.code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["counts"]["breaking"] == 0 and doc["counts"]["risk"] == 0
    assert doc["fingerprint"]["a"] == doc["fingerprint"]["b"]
