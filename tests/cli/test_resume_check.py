"""envpin resume-check through the CLI with real processes and a stand-in for TensorFlow (real TensorFlow:
tests/tf/test_resume_tf.py): a custom loop tells the hook where each step begins (envpin.before_step), the
hook stops the second run there, the third starts from what the script saved. A script that does not save
Python's random state fails, naming it; the fixed one passes; one that ignores its checkpoint is "not
resumed"; one that saves nowhere, or trains fewer steps than K, is refused (exit 2, one error and one hint)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import error_after_progress

#: As much TensorFlow as the hook needs to seed a run (random.set_seed) and count its devices; keras, a
#: stand-in without Model, keeps the real one from loading.
_TF = """
__version__ = "2.21.0"
class _NS(object):
    def __init__(self, **fns):
        self.__dict__.update(fns)
random = _NS(set_seed=lambda seed: None)
config = _NS(list_physical_devices=lambda kind: [])
"""
#: A loop of 4 steps that draws from Python's random and saves its "weights" and step after each step
#: (to $ENVPIN_RUNS_CHECKPOINT, or to the folder given after --to); --fixed also saves random's state,
#: --forget never reads the checkpoint back, --steps N trains N steps.
_SCRIPT = """
import array, json, os, random, sys
sys.path.insert(0, {site!r})
import tensorflow
from envpin import before_step
args = sys.argv[1:]
folder = args[args.index("--to") + 1] if "--to" in args else os.environ["ENVPIN_RUNS_CHECKPOINT"]
steps = int(args[args.index("--steps") + 1]) if "--steps" in args else 4
path = os.path.join(folder, "state.json")
w, step = array.array("d", [0.0]), 0
if os.path.exists(path) and "--forget" not in args:
    saved = json.load(open(path))
    w, step = array.array("d", saved["w"]), saved["step"]
    if "random" in saved:
        random.setstate((saved["random"][0], tuple(saved["random"][1]), saved["random"][2]))
while step < steps:
    before_step(step, model=[w])
    w[0] += random.random()
    step += 1
    if "--nowhere" not in args:
        saved = {{"w": list(w), "step": step}}
        if "--fixed" in args:
            saved["random"] = random.getstate()
        json.dump(saved, open(path, "w"))
print(json.dumps({{"envpin_metrics": {{"w": w[0]}}}}))
"""


@pytest.fixture
def script(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    (site / "tensorflow").mkdir(parents=True)
    (site / "tensorflow" / "__init__.py").write_text(_TF)
    (site / "keras").mkdir()
    (site / "keras" / "__init__.py").write_text("")
    path = tmp_path / "train.py"
    path.write_text(_SCRIPT.format(site=str(site)))
    return path


def test_a_random_state_left_out_of_the_checkpoint_is_named_and_the_fixed_script_passes(cli, script: Path) -> None:  # type: ignore[no-untyped-def]
    planted = cli("resume-check", "-k", "2", "--format", "json", "--", sys.executable, str(script))
    assert planted.code == 1, planted.stderr
    data = json.loads(planted.stdout)
    assert data["verdict"] == "differs" and data["not_restored"] == ["python_random"]
    assert data["end_differs"] == ["weights", "python_random"] and data["metrics_differ"] == ["w"]
    status = {c["key"]: c["status"] for c in data["components"]}
    assert status["weights"] == "restored" and status["iterator"] == "not seen"
    assert "3/3 runs" in planted.stderr  # the progress counts all three runs
    fixed = cli("resume-check", "-k", "2", "--", sys.executable, str(script), "--fixed")
    assert fixed.code == 0, fixed.stderr
    assert "identical: the resumed run ended bit-identical" in fixed.stdout
    assert "restored         Python's random" in fixed.stdout


def test_the_checkpoint_word_and_a_script_that_does_not_resume(cli, script: Path) -> None:  # type: ignore[no-untyped-def]
    result = cli("resume-check", "-k", "2", "--", sys.executable, str(script), "--to", "{checkpoint}", "--forget")
    assert result.code == 1, result.stderr
    assert "not resumed: the resumed run started from step 0, not 2" in result.stdout


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (("--nowhere",), "the interrupted run wrote nothing to its checkpoint folder"),
        (("--steps", "1"), "the uninterrupted run never began a step after 2 steps done"),
    ],
)
def test_no_checkpoint_or_too_few_steps_is_one_error(cli, script: Path, extra: tuple[str, ...], needle: str) -> None:  # type: ignore[no-untyped-def]
    result = cli("resume-check", "-k", "2", "--", sys.executable, str(script), *extra)
    lines = error_after_progress(result.stderr)
    assert result.code == 2 and len(lines) == 2, result.stderr
    assert needle in lines[0] and lines[1].startswith("hint:")
