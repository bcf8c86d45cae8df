"""The run hook and the dump comparison on the image-side Pythons (3.6 to 3.9), as they run inside NGC
images: the hook loads as sitecustomize, waits for `import tensorflow`, seeds from ENVPIN_SEED, applies the
recipe from envpin.pyz, turns the debugger on and writes its record. TensorFlow itself cannot be installed on
these Pythons here, so a stand-in package records what the hook calls (as tests/pythons/test_pythons.py does)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from envpin.runs import launch
from tests.pythons.test_pythons import find_python

# What the hook calls on TensorFlow, recorded (the version decides the recipe row: 2.9 -> stock-2.8-2.15).
FAKE_TF = """
__version__ = "2.9.1"
calls = []
class _NS(object):
    def __init__(self, **fns):
        self.__dict__.update(fns)
random = _NS(set_seed=lambda s: calls.append(["tf.random.set_seed", s]))
config = _NS(list_physical_devices=lambda kind: [],
             experimental=_NS(enable_op_determinism=lambda: calls.append(["enable_op_determinism"])))
debugging = _NS(experimental=_NS(enable_dump_debug_info=lambda root, **kw: calls.append(
    ["enable_dump_debug_info", kw["tensor_debug_mode"], kw["circular_buffer_size"]])))
def _keras_seed(s):
    import random as r
    r.seed(s)
    calls.append(["keras.utils.set_random_seed", s])
keras = _NS(utils=_NS(set_random_seed=_keras_seed))
"""
SCRIPT = (
    "import json, random, tensorflow\n"
    "print(json.dumps({'envpin_metrics': {'r': random.random()}, 'calls': tensorflow.calls}))\n"
)


@pytest.fixture(params=("3.6", "3.7", "3.8", "3.9"))
def old_python(request: pytest.FixtureRequest) -> str:
    exe = find_python(request.param)
    if exe is None:
        pytest.skip(f"no CPython {request.param} on this machine (pyenv install {request.param})")
    return exe


@pytest.mark.parametrize("recipe", [False, True])
def test_the_hook_on_an_image_python(
    old_python: str, tmp_path: Path, recipe: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    (site / "tensorflow").mkdir(parents=True)
    (site / "tensorflow" / "__init__.py").write_text(FAKE_TF)
    reader = site / "tensorflow" / "python" / "debug" / "lib"  # the hook checks that dumps can be read back
    reader.mkdir(parents=True)
    for folder in (reader, reader.parent, reader.parent.parent):
        (folder / "__init__.py").touch()
    (reader / "debug_events_reader.py").write_text("class DebugDataReader(object):\n    pass\n")
    (site / "tensorflow-2.9.1.dist-info").mkdir()
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    monkeypatch.setenv("PYTHONPATH", str(site))  # installed, as TensorFlow is in an image: found at start-up
    spec = launch.RunSpec("a", seed=5, recipe=recipe, dump=True)
    run = launch.run_once(
        [old_python, "-W", "error", str(script)], spec, launch.hook_folder(tmp_path), tmp_path / "run"
    )
    assert run.returncode == 0, run.log_tail()
    out = json.loads((tmp_path / "run" / "stdout.log").read_text().strip().splitlines()[-1])
    record = run.tf_record
    assert record is not None and record["tf_version"] == "2.9.1" and record["errors"] == []
    assert record["seed"] == 5 and record["dump"].startswith(str(tmp_path / "run" / "dump-"))
    assert ["enable_dump_debug_info", "FULL_TENSOR", -1] in out["calls"]
    if recipe:  # the recipe from envpin.pyz: Keras's seeding and op determinism
        assert record["recipe"]["id"] == "stock-2.8-2.15"
        assert ["keras.utils.set_random_seed", 5] in out["calls"] and ["enable_op_determinism"] in out["calls"]
    else:
        assert ["tf.random.set_seed", 5] in out["calls"] and ["enable_op_determinism"] not in out["calls"]
    import random

    random.seed(5)
    assert run.metrics == {"r": random.random()}  # Python's random module was seeded before the script drew


def test_the_dump_comparison_starts_on_an_image_python(old_python: str) -> None:
    program = Path(launch.__file__).with_name("dumpdiff.py")
    proc = subprocess.run([old_python, "-W", "error", str(program)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.startswith("usage: dumpdiff.py")


def test_the_slurm_node_bootstrap_on_an_image_python(old_python: str, tmp_path: Path) -> None:
    """envpin/runs/nodeboot.py under a node's old python3: unpacks the hook and runs the command with it."""
    import hashlib

    data = launch.bundle(launch.hook_folder(tmp_path))
    boot = Path(launch.__file__).with_name("nodeboot.py").read_text()
    code = "import sys; print(sys.modules['sitecustomize'].__file__)"
    proc = subprocess.run(
        [
            old_python,
            "-W",
            "error",
            "-c",
            boot,
            hashlib.sha256(data).hexdigest(),
            "ENVPIN_SEED=3",
            "--",
            old_python,
            "-c",
            code,
        ],
        input=data,
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode().strip().endswith("/hook/sitecustomize.py")


#: tf.distribute as far as the hook watches it: Strategy's constructor, which each strategy calls.
FAKE_DISTRIBUTE = """
class _Extended(object):
    worker_devices = ("/job:worker/replica:0/task:1/device:CPU:0",)
class Strategy(object):
    def __init__(self, extended):
        self.extended = extended
    num_replicas_in_sync = 2
class MultiWorkerMirroredStrategy(Strategy):
    def __init__(self):
        super(MultiWorkerMirroredStrategy, self).__init__(_Extended())
distribute = _NS(Strategy=Strategy, MultiWorkerMirroredStrategy=MultiWorkerMirroredStrategy)
"""


def test_the_hook_records_the_task_the_strategy_and_an_uncaught_exception_on_an_image_python(
    old_python: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker of a multi-worker run: its TF_CONFIG task and cluster shape (no hosts), the strategy it created
    and the exception that ended it are in its record; the exception still reaches the terminal."""
    site = tmp_path / "site"
    (site / "tensorflow").mkdir(parents=True)
    (site / "tensorflow" / "__init__.py").write_text(FAKE_TF + FAKE_DISTRIBUTE)
    script = tmp_path / "worker.py"
    script.write_text("import tensorflow\ntensorflow.distribute.MultiWorkerMirroredStrategy()\nraise KeyError('w1')\n")
    config = {"cluster": {"worker": ["10.1.1.1:1", "10.1.1.2:1"]}, "task": {"type": "worker", "index": 1}}
    monkeypatch.setenv("PYTHONPATH", str(site))
    monkeypatch.setenv("TF_CONFIG", json.dumps(config))
    spec = launch.RunSpec("a", seed=5)
    run = launch.run_once([old_python, "-W", "error", str(script)], spec, launch.hook_folder(tmp_path), tmp_path / "r")
    assert run.returncode == 1 and "KeyError: 'w1'" in run.log_tail()
    [record] = run.records
    assert record["errors"] == [] and record["task"] == {"type": "worker", "index": 1}
    assert record["cluster"] == {"worker": 2} and "10.1.1" not in json.dumps(record)
    assert record["strategy"] == {
        "class": "MultiWorkerMirroredStrategy",
        "replicas": 2,
        "devices": ["/job:worker/replica:0/task:1/device:CPU:0"],
    }
    assert record["uncaught"] == "KeyError: 'w1'"
    assert run.task_problems == [
        "worker 0 of the 2 training tasks of TF_CONFIG left no record (it did not start, did not import "
        "TensorFlow, or ended without Python's shutdown: killed, os._exit)",
        f"worker 1 (pid {record['pid']}) raised KeyError: 'w1'",
    ]
