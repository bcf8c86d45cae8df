"""envpin bisect, study and cost on older TensorFlow releases (CPU wheels in the environments that
scripts/oldtf.sh makes): 1.12 (NGC 19.01's: tf.compat without v1, whose seed only tf.set_random_seed sets),
2.1, whose debugger dumps cannot be read back (bisect refuses, study works), 2.4 (Python 3.8) and 2.12
(Keras 2). Through the real console script; the dump comparison runs on the command's own Python, as it
does for the user."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Result, error_after_progress

#: The training scripts of the runs tests (tests/tf, tests/oldtf, tests/slurm share them).
SCRIPTS = Path(__file__).resolve().parents[1] / "runs" / "scripts"
ROOT = Path(os.environ.get("ENVPIN_OLDTF_DIR", "/opt/envpin-tools/oldtf"))


def _python(release: str) -> str:
    """The environment's python, or a skip (CI=true turns it into a failure) naming how to make it."""
    exe = ROOT / f"tf-{release}" / "bin" / "python"
    if not exe.exists():
        pytest.skip(f"no TensorFlow {release} environment at {exe.parent.parent} (bash scripts/oldtf.sh)")
    return str(exe)


def run_envpin(*args: str) -> Result:
    envpin = Path(sys.executable).with_name("envpin")
    proc = subprocess.run([str(envpin), *args], capture_output=True, text=True, timeout=900)
    return Result(proc.returncode, proc.stdout, proc.stderr)


def _line_of(path: Path, needle: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


def test_bisect_refuses_tensorflow_2_1_clearly() -> None:
    result = run_envpin("bisect", "--steps", "2", "--", _python("2.1"), str(SCRIPTS / "dense.py"))
    assert result.code == 2
    error, hint = error_after_progress(result.stderr)
    assert error.startswith("error: TensorFlow 2.1.") and "cannot dump tensor values with its debugger" in error
    assert "no DebugDataReader" in error and hint.startswith("hint: `envpin study` and `envpin cost`")
    assert "2.2 or later" in hint and "Traceback" not in result.stderr


def test_study_seeds_tensorflow_1_12() -> None:
    """ENVPIN_SEED reaches TensorFlow 1.12 through the hook (envpin.probe.seeding's tf.set_random_seed, as 1.12
    has no tf.compat.v1): the fixed-seed runs agree and the varied ones do not. The hook once refused every
    run there ("could not seed the run ... module 'tensorflow._api.v1.compat' has no attribute 'v1'")."""
    result = run_envpin(
        "study", "-n", "2", "-j", "2", "--format", "json", "--", _python("1.12"), str(SCRIPTS / "dense_tf1.py")
    )
    assert result.code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["tf_version"].startswith("1.12.")
    by = {m["metric"]: m for m in data["metrics"]}
    assert all(m["seeded_by_envpin"] for m in by.values())
    assert by["init"]["fixed"]["std"] == 0.0 and by["init"]["varied"]["std"] > 0  # the seed, and only it
    # The Keras History, read by the hook: the seed decides nearly all of the spread (1.12's CPU training is
    # not always bit-identical under load, scripts/dense_tf1.py)
    assert by["loss"]["varied"]["std"] > 0 and by["loss"]["ratio"] < 0.1


@pytest.mark.parametrize("release", ["2.1", "2.4"])
def test_study_on_an_older_tensorflow(release: str) -> None:
    """The hook finds Keras's fit (tf.keras of that release) and seeds through ENVPIN_SEED: the fixed-seed
    runs of the dense script agree, the varied ones do not. (On 2.12 the cost test below shows the hook in
    Keras 2's fit: per-step times.)"""
    result = run_envpin(
        "study", "-n", "2", "-j", "2", "--format", "json", "--", _python(release), str(SCRIPTS / "dense.py")
    )
    assert result.code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["tf_version"].startswith(release + ".")
    loss = next(m for m in data["metrics"] if m["metric"] == "loss")  # from the Keras History
    assert loss["fixed"]["std"] == 0.0 and loss["varied"]["std"] > 0


@pytest.mark.parametrize(("release", "steps"), [("2.4", "--whole-run"), ("2.12", "6")])
def test_bisect_names_the_out_of_order_pipeline(release: str, steps: str) -> None:
    """The parallel map with deterministic=False delivers its elements in another order: the first
    difference is where the training step receives them. (On 2.4 a run of this script stopped after a
    few steps crashes at exit, docs/runs.md: the whole run is dumped.)"""
    script = SCRIPTS / "pipeline.py"
    args = ["--whole-run"] if steps == "--whole-run" else ["--steps", steps]
    result = run_envpin("bisect", *args, "--format", "json", "--", _python(release), str(script))
    assert result.code == 1, result.stderr
    data = json.loads(result.stdout)
    assert data["tf_version"].startswith(release + ".") and data["identical"] is False
    first = data["first_difference"]
    assert first["op_type"] == "IteratorGetNext" and first["difference"]["bit_equal"] < first["difference"]["elements"]
    assert data["source"]["file"] == str(script) and data["source"]["line"] == _line_of(script, "model.fit(")


def test_cost_applies_the_recipe_of_tensorflow_2_12() -> None:
    result = run_envpin("cost", "--repeat", "2", "--format", "json", "--", _python("2.12"), str(SCRIPTS / "dense.py"))
    assert result.code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["tf_version"].startswith("2.12.") and data["recipe"] == "stock-2.8-2.15" and data["unit"] == "step"
    assert len(data["with_recipe"]["values"]) == len(data["without_recipe"]["values"]) == 2
