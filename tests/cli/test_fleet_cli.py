"""`envpin fleet report` across real process boundaries: probe reports written by the installed console
script, the payload's own output as kubectl collects it, a hash seed per process, and an salloc that hangs
(the in-process tests of the same commands are tests/unit/test_fleet_cli.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from envpin.environment import payload
from tests.conftest import run_envpin
from tests.fleetdata import prefixed, write_fleet


def test_reports_of_one_machine_are_consistent_end_to_end(tmp_path: Path) -> None:
    """Two real probe runs through the installed console script: one class, exit 0."""
    folder = tmp_path / "reports"
    folder.mkdir()
    for name in ("a.json", "b.json"):
        res = run_envpin("probe", "-o", str(folder / name), env={"OMP_NUM_THREADS": "2"})
        assert res.code == 0, res.stderr
    res = run_envpin("fleet", "report", str(folder))
    assert res.code == 0, res.stderr
    assert res.stdout.splitlines()[0] == "2 nodes consistent except informational differences"
    assert res.stderr == ""
    res = run_envpin("fleet", "report", str(folder), "--format", "json")
    doc = json.loads(res.stdout)
    assert res.code == 0 and doc["counts"]["classes"] == 1 and doc["counts"]["ok"] == 2
    assert len(doc["nodes"]) == 2  # the same host name twice: made unique


def test_the_payload_output_collected_by_kubectl_is_read(tmp_path: Path) -> None:
    """What the DaemonSet's probe container prints (`python3 envpin.pyz --json -`), prefixed the way
    `kubectl logs --prefix` prefixes it, is one probed node named by ENVPIN_NODE_NAME."""
    pyz = tmp_path / "envpin.pyz"
    pyz.write_bytes(payload.payload())
    proc = subprocess.run(
        [sys.executable, "-I", str(pyz), "--json", "-", "--no-selftest"],
        capture_output=True,
        text=True,
        env={"ENVPIN_NODE_NAME": "gpu-node-7", "PATH": "/usr/bin:/bin"},
        timeout=120,
        check=True,
    )
    log = tmp_path / "probe.log"
    log.write_text(prefixed("envpin-probe-abcde", proc.stdout))
    res = run_envpin("fleet", "report", str(log), "--format", "json")
    assert res.code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert list(doc["nodes"]) == ["gpu-node-7"] and doc["nodes"]["gpu-node-7"]["status"] == "ok"


def test_output_does_not_depend_on_hash_seed(tmp_path: Path) -> None:
    write_fleet(tmp_path / "reports")
    outputs = []
    for seed in ("1", "2"):
        res = run_envpin(
            "fleet",
            "report",
            "reports",
            "--format",
            "json",
            "--html",
            f"{seed}.html",
            cwd=tmp_path,
            env={"PYTHONHASHSEED": seed},
        )
        assert res.code == 1, res.stderr
        outputs.append((res.stdout, (tmp_path / f"{seed}.html").read_bytes()))
    assert outputs[0] == outputs[1]


def test_an_allocation_that_does_not_answer_is_withdrawn(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """salloc past its limit goes through the path an interrupt takes (signals held, salloc stopped, the
    job released): it ends in one SlurmError, not an ImportError from that path (it imported signals_held
    from where it no longer lives, so Ctrl-C left a pending job behind: tests/slurm caught it)."""
    from envpin.errors import SlurmError
    from envpin.fleet import slurm

    monkeypatch.setenv("PATH", str(tmp_path))  # no squeue, no scancel: release() has nothing to cancel
    hanging = [sys.executable, "-c", "import time; time.sleep(30)"]
    with pytest.raises(SlurmError, match="salloc did not answer within 0 s"):
        slurm.allocate(hanging, 0.3, "envpin-test-token")
