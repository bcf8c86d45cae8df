"""`envpin.enable_determinism` (the one call a training script makes, envpin/probe/runtime.py) under real older
TensorFlow releases, each on the CPython its wheels need (environments from scripts/oldtf.sh): 1.12 (NGC 19.01's
TensorFlow: `tf.compat` without `v1`), 1.15 (the TF_CUDNN_DETERMINISTIC recipe), 2.1 and 2.4. A seed must make
a random op's values the same in two fresh processes, and another seed must change them."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.oldtf.test_runs_oldtf import _python

REPO = Path(__file__).resolve().parents[2]

#: What the training script does: the helper first, then a random op (graph mode on TF 1.x, eager on 2.x).
_PROGRAM = """
import json, sys
import envpin
report = envpin.enable_determinism(seed=int(sys.argv[1]))
import tensorflow as tf
if tf.executing_eagerly():
    values = tf.random.uniform([4]).numpy().tolist()
else:
    v1 = getattr(tf.compat, "v1", None) or tf
    with v1.Session() as session:
        values = session.run(v1.random_uniform([4])).tolist()
print(json.dumps({"report": report, "values": values}))
"""


def _run(release: str, seed: int) -> dict:  # type: ignore[type-arg]
    env = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2"}
    proc = subprocess.run(
        [_python(release), "-W", "ignore", "-c", _PROGRAM, str(seed)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    ("release", "recipe", "env"),
    [
        ("1.12", "stock-1.13-and-older", None),
        ("1.15", "stock-1.14-2.0", "TF_CUDNN_DETERMINISTIC=1"),
        ("2.1", "stock-2.1-2.4", "TF_DETERMINISTIC_OPS=1"),
        ("2.4", "stock-2.1-2.4", "TF_DETERMINISTIC_OPS=1"),
    ],
)
def test_the_seed_reaches_tensorflow_and_another_seed_changes_the_values(
    release: str, recipe: str, env: str | None
) -> None:
    first, again, other = _run(release, 42), _run(release, 42), _run(release, 7)
    report = first["report"]
    assert report["tf_version"].startswith(release + ".") and report["recipe"] == recipe
    assert {"seed_python", "seed_numpy", "seed_tf"} <= set(report["applied"]) and report["skipped"] == []
    if env is not None:
        assert f"env {env}" in report["applied"]
    assert first["values"] == again["values"]
    assert first["values"] != other["values"]
