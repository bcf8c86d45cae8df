"""envpin study and bisect on distributed TensorFlow commands (CPU), through the real console script: one
process with MirroredStrategy over the CPU split into 2 logical devices (tests/runs/scripts/mirrored.py,
Keras fit), and MultiWorkerMirroredStrategy over 2 worker processes on 127.0.0.1 started by a launcher
(tests/runs/scripts/workers.py, mwms.py: a custom loop with RING collectives). A planted weighted bincount
(nondeterministic on CPU) runs on one replica only: bisect names it on that replica, and on the other the
all-reduce through which the difference arrives."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import error_after_progress
from tests.tf.test_runs_tf import SCRIPTS, _line_of, run_envpin

pytestmark = pytest.mark.slow
PYTHON = sys.executable
MIRRORED = (PYTHON, str(SCRIPTS / "mirrored.py"))
WORKERS = (PYTHON, str(SCRIPTS / "workers.py"))
MWMS = (PYTHON, str(SCRIPTS / "mwms.py"))
CPU = "/job:localhost/replica:0/task:0/device:CPU:"


def test_study_of_a_mirrored_strategy_run_sees_every_fixed_seed_run_equal() -> None:
    result = run_envpin("study", "-n", "2", "-j", "2", "--format", "json", "--", *MIRRORED)
    assert result.code == 0, result.stderr
    data = json.loads(result.stdout)
    by = {m["metric"]: m for m in data["metrics"]}
    assert by["loss"]["fixed"]["std"] == 0.0 and by["loss"]["varied"]["std"] > 0  # Keras History, read by the hook
    assert "exactly the same value" in by["loss"]["verdict"]
    shape = data["distributed"]
    assert shape["processes"] == 1 and shape["tasks"] == [] and shape["strategy"] == "MirroredStrategy"
    assert shape["replicas"] == 2 and shape["devices"] == [CPU + "0", CPU + "1"]


def test_bisect_of_replica_1_of_a_mirrored_run_is_bit_identical_and_says_so() -> None:
    result = run_envpin("bisect", "--steps", "3", "--replica", "1", "--format", "json", "--", *MIRRORED)
    assert result.code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["identical"] is True and data["compared"] > 0
    replica = data["replica"]
    assert replica["mode"] == "device" and replica["index"] == 1 and replica["device"] == CPU + "1"
    assert all(n > 0 for n in replica["other_devices"])  # replica 0's executions were left out


def test_bisect_names_the_bincount_planted_on_replica_1_and_the_all_reduce_on_replica_0(tmp_path: Path) -> None:
    script = SCRIPTS / "mirrored.py"
    one = run_envpin("bisect", "--steps", "3", "--replica", "1", "--format", "json", "--", *MIRRORED, "--plant")
    assert one.code == 1, one.stderr
    data = json.loads(one.stdout)
    first = data["first_difference"]
    assert first["op_type"] in ("Bincount", "DenseBincount") and first["device"] == CPU + "1"
    assert data["source"]["line"] == _line_of(script, "tf.math.bincount(")
    assert data["replica"]["device"] == CPU + "1" and data["replica"]["note"] is None
    zero = run_envpin("bisect", "--steps", "3", "--", *MIRRORED, "--plant")  # default: replica 0
    assert zero.code == 1, zero.stderr
    lines = zero.stdout.splitlines()
    assert lines[1].startswith(f"replica 0 of 2: device {CPU}0 of one process (pid ")
    assert "Bincount" not in zero.stdout and "first difference: Collective" in zero.stdout
    assert "the difference came in from another replica (compare --replica 1)" in zero.stdout


def test_study_of_two_workers_compares_whole_runs() -> None:
    result = run_envpin("study", "-n", "2", "-j", "2", "--format", "json", "--", *WORKERS, "--", *MWMS)
    assert result.code == 0, result.stderr
    data = json.loads(result.stdout)
    by = {m["metric"]: m for m in data["metrics"]}
    assert by["weight_sum"]["fixed"]["std"] == 0.0 and by["weight_sum"]["varied"]["std"] > 0
    shape = data["distributed"]
    assert shape["processes"] == 2 and shape["replicas"] == 2 and shape["cluster"] == {"worker": 2}
    assert shape["chief"] == {"type": "worker", "index": 0}
    assert all(len(run["processes"]) == 2 for run in data["runs"])


def test_a_worker_that_fails_makes_the_run_fail_and_is_named(tmp_path: Path) -> None:
    """The launcher exits 0 whatever its workers did, as `cmd & cmd & wait` does."""
    keep = tmp_path / "keep"
    command = [*WORKERS, "--ignore-status", "--", *MWMS, "--fail-task", "1"]
    result = run_envpin("study", "-n", "2", "--keep", str(keep), "--", *command)
    lines = error_after_progress(result.stderr)  # after the progress lines of the runs made
    assert result.code == 2 and len(lines) == 2 and not result.stdout, result.stderr
    assert "a distributed run did not run whole (fixed 1, the command exited with status 0): worker 1 (pid" in lines[0]
    assert "raised RuntimeError: planted failure of worker 1 after training" in lines[0]
    assert lines[1].startswith("hint: every training task of TF_CONFIG must run to its end")
    assert [p.name for p in keep.glob("run-*")] == ["run-000"]  # no further run started


def test_bisect_reads_the_chief_by_default_and_task_1_when_asked(tmp_path: Path) -> None:
    keep = tmp_path / "keep"
    command = ["--", *WORKERS, "--", *MWMS, "--plant-task", "1"]
    chief = run_envpin("bisect", "--format", "json", *command)
    assert chief.code == 1, chief.stderr
    data = json.loads(chief.stdout)
    replica = data["replica"]
    assert replica["mode"] == "task" and replica["task"] == {"type": "worker", "index": 0} and replica["chief"]
    assert data["first_difference"]["op_type"].startswith("Collective") and "compare --replica 1" in replica["note"]
    one = run_envpin("bisect", "--replica", "1", "--keep", str(keep), "--format", "json", *command)
    assert one.code == 1, one.stderr
    data = json.loads(one.stdout)
    replica = data["replica"]
    assert replica["task"] == {"type": "worker", "index": 1} and not replica["chief"]
    assert data["first_difference"]["op_type"] in ("Bincount", "DenseBincount")
    assert data["source"]["line"] == _line_of(SCRIPTS / "mwms.py", "tf.math.bincount(")
    # The dumps compared are task 1's: the hook's record of each pid named says so.
    for dump, pid in zip(data["dumps"], replica["pids"], strict=True):
        record = json.loads((Path(dump).parent / f"hook-{pid}.json").read_text())
        assert Path(dump).name == f"dump-{pid}" and record["task"] == {"type": "worker", "index": 1}
