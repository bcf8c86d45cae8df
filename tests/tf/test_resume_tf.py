"""envpin resume-check on real TensorFlow (CPU): a custom loop that checkpoints with tf.train.Checkpoint but
leaves its tf.data iterator out fails, naming the iterator (weights and optimizer slots restored); the same
script with tf.train.Checkpoint(iterator=...) passes. The two checks run side by side (6 runs of a tiny
linear model, 6 steps each). Through the real console script."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "runs" / "scripts" / "resume.py"
pytestmark = pytest.mark.slow  # tests/tf/conftest.py marks them `tensorflow` and skips them without it


def test_an_iterator_left_out_of_the_checkpoint_is_named_and_the_fixed_script_passes(tmp_path: Path) -> None:
    envpin = Path(sys.executable).with_name("envpin")
    checks = {
        name: subprocess.Popen(
            [str(envpin), "resume-check", "-k", "3", "--format", "json", "--", sys.executable, str(SCRIPT), *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, extra in (("planted", ()), ("fixed", ("--fixed",)))
    }
    out = {name: proc.communicate(timeout=600) for name, proc in checks.items()}
    assert checks["planted"].returncode == 1, out["planted"][1]
    planted = json.loads(out["planted"][0])
    assert planted["verdict"] == "differs" and planted["not_restored"] == ["iterator"]
    status = {c["key"]: c["status"] for c in planted["components"]}
    assert status["weights"] == status["optimizer_slots"] == status["optimizer_iterations"] == "restored"
    assert "weights" in planted["end_differs"] and "loss" in planted["metrics_differ"]
    [iterator] = [c for c in planted["components"] if c["key"] == "iterator"]
    assert "tf.train.Checkpoint(iterator=iterator)" in iterator["advice"] and iterator["sources"]
    assert checks["fixed"].returncode == 0, out["fixed"][1]
    fixed = json.loads(out["fixed"][0])
    assert fixed["verdict"] == "identical" and fixed["not_restored"] == [] and fixed["resumed_from"] == 3
    assert {c["key"]: c["status"] for c in fixed["components"]}["iterator"] == "restored"
