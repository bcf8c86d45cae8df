"""`envpin study` with one run per Slurm task: the command is prefixed with srun, which exports the run's
ENVPIN_SEED to the node and brings its metrics line back. The test cluster has no shared storage, so the hook
folder is not on the nodes: the seed and the metrics line are all that travel (docs/runs.md says so)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CONF = Path(os.environ.get("ENVPIN_SLURM_CONF", "/run/envpin-test/slurm/conf/slurm.conf"))


def _cluster_error() -> str | None:
    if shutil.which("srun") is None:
        return "srun is not installed (scripts/slurm.sh up)"
    if not CONF.is_file():
        return f"no test cluster: {CONF} is missing (bash scripts/slurm.sh up)"
    proc = subprocess.run(["sinfo", "-h", "-o", "%T"], env={**os.environ, "SLURM_CONF": str(CONF)},
                          capture_output=True, text=True, timeout=30)
    return None if proc.returncode == 0 and proc.stdout.strip() else f"sinfo: {proc.stderr.strip()[-200:]}"


_ERROR = _cluster_error()
pytestmark = [pytest.mark.slurm, pytest.mark.slow,
              pytest.mark.skipif(_ERROR is not None, reason=f"Slurm test cluster unavailable: {_ERROR}")]

SCRIPT = ("import json, os, random, socket; random.seed(int(os.environ['ENVPIN_SEED'])); "
          "print(json.dumps({'envpin_metrics': {'score': random.random()}}))")


def test_study_one_run_per_slurm_task() -> None:
    envpin = str(Path(sys.executable).with_name("envpin"))
    proc = subprocess.run([envpin, "study", "-n", "3", "-j", "3", "--format", "json", "--",
                           "srun", "-N1", "-n1", "python3", "-c", SCRIPT],
                          env={**os.environ, "SLURM_CONF": str(CONF)}, capture_output=True, text=True,
                          timeout=600, cwd="/tmp")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert [r["seed"] for r in data["runs"]] == [42, 42, 42, 43, 44, 45]
    [metric] = data["metrics"]
    assert metric["fixed"]["std"] == 0.0 and metric["varied"]["std"] > 0
    import random

    random.seed(43)
    assert data["runs"][3]["metrics"] == {"score": random.random()}  # the seed reached the node
