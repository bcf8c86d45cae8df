"""envpin study and bisect on distributed commands, through the CLI, with real processes and a stand-in for
TensorFlow and Keras (real TensorFlow: tests/tf/test_runs_distributed_tf.py): the hook learns each process's
TF_CONFIG task and the strategy the script creates; study takes the chief's numbers, refuses a run in which
a worker failed (naming it) and runs of different shapes; bisect refuses a replica the runs do not have as
soon as the first run shows it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import error_after_progress

pytestmark = pytest.mark.slow
SCRIPTS = Path(__file__).resolve().parents[1] / "runs" / "scripts"
WORKERS = (sys.executable, str(SCRIPTS / "workers.py"))

#: TensorFlow as far as the hook and the script below use it: seeding, the debugger's switch and reader, and
#: tf.distribute's Strategy, whose constructor the hook watches (MultiWorkerMirroredStrategy counts the
#: training tasks of TF_CONFIG, as the real one counts their devices).
_TF = """
__version__ = "2.21.0"
class _NS(object):
    def __init__(self, **fns):
        self.__dict__.update(fns)
random = _NS(set_seed=lambda seed: None)
config = _NS(list_physical_devices=lambda kind: [])
debugging = _NS(experimental=_NS(enable_dump_debug_info=lambda root, **kw: None))
class _Extended(object):
    def __init__(self, devices):
        self.worker_devices = tuple(devices)
class Strategy(object):
    def __init__(self, extended):
        self.extended = extended
    @property
    def num_replicas_in_sync(self):
        return self._replicas
class MirroredStrategy(Strategy):
    def __init__(self, count):
        self._replicas = count
        devices = ["/job:localhost/replica:0/task:0/device:CPU:%d" % i for i in range(count)]
        super(MirroredStrategy, self).__init__(_Extended(devices))
class MultiWorkerMirroredStrategy(Strategy):
    def __init__(self):
        import json, os
        config = json.loads(os.environ["TF_CONFIG"])
        self._replicas = sum(len(config["cluster"].get(job, ())) for job in ("chief", "worker"))
        task = config["task"]
        device = "/job:%s/replica:0/task:%d/device:CPU:0" % (task["type"], task["index"])
        super(MultiWorkerMirroredStrategy, self).__init__(_Extended([device]))
distribute = _NS(Strategy=Strategy, MirroredStrategy=MirroredStrategy,
                 MultiWorkerMirroredStrategy=MultiWorkerMirroredStrategy)
"""
#: Keras's Model.fit as the hook sees it: callbacks around each step, a History.
_KERAS = """
class _Callback(object):
    model = None
class callbacks(object):
    Callback = _Callback
class _History(object):
    def __init__(self, history):
        self.history = history
class Model(object):
    stop_training = False
    def fit(self, steps=1, loss=0.0, epochs=1, callbacks=(), **kwargs):
        for callback in callbacks:
            callback.model = self
        for step in range(steps):
            for callback in callbacks:
                callback.on_train_batch_begin(step)
            for callback in callbacks:
                callback.on_train_batch_end(step)
        return _History({"loss": [loss]})
"""
#: One worker: its replica id is TensorFlow's (the chief 0, then the workers); it trains one more step than
#: the replica before it, and its loss is its id plus a draw of the seeded `random`, so the chief's is under 1.
_SCRIPT = """
import json, os, random, sys
sys.path.insert(0, {site!r})
import tensorflow as tf
import keras
args = sys.argv[1:]
def option(name):
    return int(args[args.index(name) + 1]) if name in args else None
config = json.loads(os.environ.get("TF_CONFIG") or "{{}}")
task = config.get("task", {{}})
replica = task.get("index", 0) + (task.get("type") == "worker" and "chief" in config.get("cluster", {{}}))
if option("--mirrored") is not None:
    tf.distribute.MirroredStrategy(option("--mirrored"))
elif "--replicas-from-seed" in args:
    tf.distribute.MirroredStrategy(1 + int(os.environ["ENVPIN_SEED"]) % 2)
elif config:
    tf.distribute.MultiWorkerMirroredStrategy()
keras.Model().fit(steps=2 + replica, loss=replica + random.random())
if replica == option("--fail-task"):
    raise RuntimeError("planted failure of task %d" % replica)
if replica == option("--exit-task"):
    os._exit(0)
"""


def _one_error(result) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    """One error line and one hint line, exit 2 (the error may quote a failed command's stderr: its traceback
    is the command's, on the error line, not envpin's)."""
    lines = error_after_progress(result.stderr)  # after the progress lines of the runs made
    assert result.code == 2, result.stderr
    assert len(lines) == 2 and lines[0].startswith("error:") and lines[1].startswith("hint:"), result.stderr
    return lines[0], lines[1]


@pytest.fixture
def script(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    reader = site / "tensorflow" / "python" / "debug" / "lib"  # the hook checks that dumps can be read back
    reader.mkdir(parents=True)
    for folder in (reader, reader.parent, reader.parent.parent):
        (folder / "__init__.py").touch()
    (reader / "debug_events_reader.py").write_text("class DebugDataReader(object):\n    pass\n")
    (site / "tensorflow" / "__init__.py").write_text(_TF)
    (site / "keras").mkdir()
    (site / "keras" / "__init__.py").write_text(_KERAS)
    path = tmp_path / "worker.py"
    path.write_text(_SCRIPT.format(site=str(site)))
    return path


def test_study_takes_the_chief_numbers_and_says_what_each_run_was(cli, script: Path) -> None:  # type: ignore[no-untyped-def]
    """Worker 1 trains more steps (the rule for one process would take its record) and reports a loss above 1:
    every value is the chief's. The report names the processes and the replicas."""
    result = cli("study", "-n", "2", "--format", "json", "--", *WORKERS, "--", sys.executable, str(script))
    assert result.code == 0, result.stderr
    data = json.loads(result.stdout)
    [loss] = data["metrics"]
    assert loss["fixed"]["std"] == 0.0 and loss["varied"]["std"] > 0
    assert all(v < 1 for v in loss["fixed"]["values"] + loss["varied"]["values"])
    shape = data["distributed"]
    assert shape["processes"] == 2 and shape["replicas"] == 2 and shape["chief"] == {"type": "worker", "index": 0}
    assert [t["index"] for t in shape["tasks"]] == [0, 1] and shape["strategy"] == "MultiWorkerMirroredStrategy"
    for run in data["runs"]:
        pids = {p["task"]["index"]: p["pid"] for p in run["processes"]}
        assert sorted(pids) == [0, 1] and run["metrics_from_pid"] == pids[0]
    text = cli("study", "-n", "2", "--", *WORKERS, "--", sys.executable, str(script))
    assert text.code == 0, text.stderr
    assert (
        "each run: 2 processes (worker 0, worker 1), 2 replicas (MultiWorkerMirroredStrategy), every one run to "
        "its end; Keras History from worker 0, the chief (a metrics line on stdout counts whichever process printed "
        "it last)" in text.stdout
    )


def test_a_chief_task_is_the_chief(cli, script: Path) -> None:  # type: ignore[no-untyped-def]
    """With a `chief` job in TF_CONFIG the chief is that task (replica 0), not worker 0 (replica 1)."""
    result = cli("study", "-n", "2", "--format", "json", "--", *WORKERS, "--chief", "--", sys.executable, str(script))
    assert result.code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["distributed"]["chief"] == {"type": "chief", "index": 0}
    assert [(t["type"], t["index"]) for t in data["distributed"]["tasks"]] == [("chief", 0), ("worker", 0)]
    assert all(v < 1 for m in data["metrics"] for v in m["fixed"]["values"] + m["varied"]["values"])


def test_a_plain_run_reports_as_before(cli, script: Path) -> None:  # type: ignore[no-untyped-def]
    """One process without TF_CONFIG or a strategy: nothing distributed in the report."""
    result = cli("study", "-n", "2", "--format", "json", "--", sys.executable, str(script))
    assert result.code == 0, result.stderr
    data = json.loads(result.stdout)
    assert "distributed" not in data and all("processes" not in run for run in data["runs"])
    text = cli("study", "-n", "2", "--", sys.executable, str(script))
    assert text.code == 0 and "each run:" not in text.stdout


@pytest.mark.parametrize(
    ("launcher", "worker", "words"),
    [
        (("--ignore-status",), ("--fail-task", "1"), "the command exited with status 0): worker 1 (pid "),
        ((), ("--fail-task", "1"), "the command exited with status 1 (fixed 1); worker 1 (pid "),
        (("--ignore-status",), ("--exit-task", "1"), "worker 1 of the 2 training tasks of TF_CONFIG left no record"),
    ],
)
def test_a_run_in_which_one_worker_failed_is_a_failed_run_that_names_it(  # type: ignore[no-untyped-def]
    cli, script: Path, tmp_path: Path, launcher: tuple[str, ...], worker: tuple[str, ...], words: str
) -> None:
    """Whether or not the launcher passes the worker's status on: the run failed, the worker is named, and no
    further run starts."""
    keep = tmp_path / "keep"
    result = cli(
        "study", "-n", "2", "--keep", str(keep), "--", *WORKERS, *launcher, "--", sys.executable, str(script), *worker
    )
    error, _ = _one_error(result)
    assert words in error, error
    assert ("raised RuntimeError: planted failure of task 1" in error) is (worker[0] == "--fail-task")
    assert "worker 0" not in error and not result.stdout
    assert [p.name for p in keep.glob("run-*")] == ["run-000"]


def test_runs_of_different_shapes_are_refused(cli, script: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The replica count follows the seed: the first varied run has 2 replicas where the fixed ones had 1. The
    runs are not compared; none starts after it."""
    keep = tmp_path / "keep"
    result = cli("study", "-n", "2", "--keep", str(keep), "--", sys.executable, str(script), "--replicas-from-seed")
    error, hint = _one_error(result)
    assert (
        "the runs are not comparable: fixed 1 ran as one process, 1 replica (MirroredStrategy), varied 1 as one "
        "process, 2 replicas (MirroredStrategy)" in error
    )
    assert "same workers and devices" in hint and not result.stdout
    assert sorted(p.name for p in keep.glob("run-*")) == ["run-000", "run-001", "run-002"]


@pytest.mark.parametrize(
    ("command", "words"),
    [
        (("--mirrored", "2"), "replica 2 is out of range: the run had 2 (one process, 2 replicas (MirroredStrategy))"),
        (("--mirrored", "1"), "replica 2 is out of range: the run had 1 (one process, 1 replica (MirroredStrategy))"),
        ((), "replica 2 is out of range: the run had 1 (one process, no tf.distribute strategy seen)"),
    ],
)
def test_bisect_refuses_a_replica_the_first_run_did_not_have(  # type: ignore[no-untyped-def]
    cli, script: Path, tmp_path: Path, command: tuple[str, ...], words: str
) -> None:
    keep = tmp_path / "keep"
    result = cli("bisect", "--replica", "2", "--keep", str(keep), "--", sys.executable, str(script), *command)
    error, hint = _one_error(result)
    assert words in error and "--replica between 0 and" in hint, error
    assert [p.name for p in keep.glob("run-*")] == ["run-000"] and not result.stdout  # the second never ran


def test_bisect_refuses_a_task_a_multi_worker_run_did_not_have(cli, script: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    keep = tmp_path / "keep"
    result = cli("bisect", "--replica", "2", "--keep", str(keep), "--", *WORKERS, "--", sys.executable, str(script))
    error, hint = _one_error(result)
    assert "replica 2 is out of range: the run had 2 (2 processes (worker 0, worker 1), 2 replicas" in error
    assert "--replica between 0 and 1" in hint and [p.name for p in keep.glob("run-*")] == ["run-000"]
