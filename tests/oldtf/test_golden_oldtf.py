"""The golden training run's TF1 path (graph and Session, the graph's seed set inside it through
envpin.probe.seeding) on TensorFlow 1.15 (scripts/oldtf.sh's environment): two fresh processes train to the
same weights."""

from __future__ import annotations

import json
import os
import subprocess

from tests.conftest import REPO
from tests.oldtf.test_runs_oldtf import _python


def test_the_golden_run_trains_on_tensorflow_1_15_bit_identically(tmp_path) -> None:  # type: ignore[no-untyped-def]
    env = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2"}
    proc = subprocess.run(
        [_python("1.15"), "-m", "envpin.probe.golden", "--steps", "5"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "error" not in result, result
    assert result["tf_version"].startswith("1.15.") and result["runs"] == 2 and result["runs_equal"] is True
    assert result["hash"].startswith("sha256:") and len(set(result["hashes"])) == 1
