"""A distributed run read from its hook records, in-process: which record is which TF_CONFIG task, the chief,
the training tasks that must all have run, the run's shape, what `replica` K names, and how the reports say
it; the hook's reading of TF_CONFIG and the dump comparison's device filter. The commands themselves run in
tests/cli/test_runs_distributed.py (stand-ins) and tests/tf/test_runs_distributed_tf.py (TensorFlow)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from envpin.runs import dumpdiff, hook, launch, tasks
from envpin.runs.tasks import Shape, Task
from envpin.views.runs import bisect_lines, distributed_line, replica_lines

MIRRORED = {
    "class": "MirroredStrategy",
    "replicas": 2,
    "devices": ["/job:localhost/replica:0/task:0/device:CPU:0", "/job:localhost/replica:0/task:0/device:CPU:1"],
}


def _record(pid: int, task: tuple[str, int] | None = None, *, steps: int = 3, **extra: Any) -> dict[str, Any]:
    record: dict[str, Any] = {"pid": pid, "tf_version": "2.21.0", "started": pid, "step_seconds": [0.1] * steps}
    if task is not None:
        record["task"] = {"type": task[0], "index": task[1]}
        record["cluster"] = extra.pop("cluster", {"worker": 2})
        record["strategy"] = extra.pop("strategy", {"class": "MultiWorkerMirroredStrategy", "replicas": 2})
    record.update(extra)
    return record


def _workers(*extra: dict[str, Any]) -> list[dict[str, Any]]:
    return [_record(11, ("worker", 1), steps=5), _record(10, ("worker", 0)), *extra]


def test_each_task_gets_its_record_and_the_chief_is_worker_0_or_the_chief_task() -> None:
    records = [*_workers(), _record(12, ("worker", 0), steps=1)]  # a helper process of worker 0 trains less
    assert {t.label: r["pid"] for t, r in tasks.by_task(records).items()} == {"worker 0": 10, "worker 1": 11}
    assert tasks.chief_record(records)["pid"] == 10  # type: ignore[index]
    assert tasks.main_record(records)["pid"] == 11  # type: ignore[index]  # one process's rule: the most steps
    assert tasks.training_tasks({"chief": 1, "worker": 2, "evaluator": 1}) == [
        Task("chief", 0),
        Task("worker", 0),
        Task("worker", 1),
    ]
    assert tasks.chief({"worker": 3}) == Task("worker", 0) and tasks.chief({"chief": 1}) == Task("chief", 0)
    assert tasks.chief({}) is None
    with_chief = [_record(20, ("chief", 0), cluster={"chief": 1, "worker": 1}, steps=1)]
    with_chief.append(_record(21, ("worker", 0), cluster={"chief": 1, "worker": 1}, steps=9))
    assert tasks.chief_record(with_chief)["pid"] == 20  # type: ignore[index]


def test_a_record_without_a_usable_task_is_no_task() -> None:
    for task in (None, "worker", {"type": "worker"}, {"type": 1, "index": 0}, {"type": "worker", "index": -1}):
        assert tasks.task_of({"task": task}) is None
    assert tasks.task_of({"task": {"type": "worker", "index": True}}) is None
    assert tasks.task_of({"task": {"type": "chief", "index": 0}}) == Task("chief", 0)


def test_shapes_of_the_three_kinds_of_run() -> None:
    plain = tasks.shape([_record(1)])
    assert (
        not plain.distributed
        and plain.processes == 1
        and plain.describe() == "one process, no tf.distribute strategy seen"
    )
    mirrored = tasks.shape([_record(1, strategy=MIRRORED)])
    assert mirrored.distributed and mirrored.processes == 1 and mirrored.devices == tuple(MIRRORED["devices"])
    assert mirrored.describe() == "one process, 2 replicas (MirroredStrategy)"
    workers = tasks.shape(_workers())
    assert workers.tasks == (Task("worker", 0), Task("worker", 1)) and workers.chief == Task("worker", 0)
    assert workers.describe() == "2 processes (worker 0, worker 1), 2 replicas (MultiWorkerMirroredStrategy)"
    assert workers.to_dict()["cluster"] == {"worker": 2} and workers.key() != mirrored.key() != plain.key()


def test_a_whole_run_has_no_problem_and_each_failure_is_named() -> None:
    assert tasks.problems(_workers()) == []
    [missing] = tasks.problems([_record(10, ("worker", 0))])
    assert missing.startswith("worker 1 of the 2 training tasks of TF_CONFIG left no record")
    [raised] = tasks.problems(_workers(_record(13, ("worker", 1), steps=9, uncaught="RuntimeError: boom")))
    assert raised == "worker 1 (pid 13) raised RuntimeError: boom"
    odd = [_record(10, ("worker", 0)), _record(11, ("worker", 1), cluster={"worker": 3})]
    assert any("different clusters" in p for p in tasks.problems(odd))
    # An evaluator is not a training task: the run is whole without it.
    assert tasks.problems([_record(10, ("worker", 0), cluster={"worker": 1, "evaluator": 1})]) == []
    # A plain run fails by its exit status alone, whatever a helper process raised.
    assert tasks.problems([_record(1, uncaught="ValueError: x")]) == []


def test_a_run_with_a_failed_worker_has_failed_whatever_its_status(tmp_path: Path) -> None:
    spec = launch.RunSpec("fixed 1", seed=42)
    whole = launch.Run(spec, tmp_path, 0, 1.0, records=_workers())
    assert not whole.failed and whole.chief_record["pid"] == 10  # type: ignore[index]
    broken = launch.Run(spec, tmp_path, 0, 1.0, records=_workers(_record(14, ("worker", 1), steps=9, uncaught="E: x")))
    assert broken.failed and launch.unusable(broken)
    error = launch.failed(broken)
    assert (
        "did not run whole (fixed 1, the command exited with status 0): worker 1 (pid 14) raised E: x" in error.message
    )
    timed = launch.Run(spec, tmp_path, -9, 1.0, records=[_record(10, ("worker", 0), uncaught="E: y")], timed_out=True)
    assert "before that, worker 0 (pid 10) raised E: y" in launch.failed(timed).message
    assert "left no record" not in launch.failed(timed).message  # the tasks the timeout killed say nothing


def test_runs_of_another_shape_are_never_compared(tmp_path: Path) -> None:
    runs = [
        launch.Run(launch.RunSpec(label, seed=1), tmp_path, 0, 1.0, records=records)
        for label, records in (("fixed 1", _workers()), ("fixed 2", _workers()), ("varied 1", [_record(3)]))
    ]
    assert launch.same_shape(runs[:2]) == runs[0].shape
    with pytest.raises(launch.RunError) as err:
        launch.same_shape(runs)
    assert err.value.message == (
        "the runs are not comparable: fixed 1 ran as 2 processes (worker 0, worker 1), 2 replicas "
        "(MultiWorkerMirroredStrategy), varied 1 as one process, no tf.distribute strategy seen"
    )
    changed = launch.shape_changed()
    assert [changed(run) for run in runs] == [False, False, True]


def test_replica_k_is_a_task_a_device_or_the_one_process() -> None:
    workers = tasks.shape(_workers())
    assert tasks.replica(workers, None) == tasks.Replica(0, 2, "task", task=Task("worker", 0))
    assert tasks.replica(workers, 1).task == Task("worker", 1)
    chief_first = tasks.shape(
        [
            _record(21, ("worker", 0), cluster={"chief": 1, "worker": 1}),
            _record(20, ("chief", 0), cluster={"chief": 1, "worker": 1}),
        ]
    )
    assert tasks.replica(chief_first, None).task == Task("chief", 0)
    assert tasks.replica(chief_first, 1).task == Task("worker", 0)
    mirrored = tasks.shape([_record(1, strategy=MIRRORED)])
    assert tasks.replica(mirrored, None).device == MIRRORED["devices"][0]
    assert tasks.replica(mirrored, 1) == tasks.Replica(1, 2, "device", device=MIRRORED["devices"][1])
    plain = tasks.replica(tasks.shape([_record(1)]), 0)
    assert plain.mode == "process" and plain.of == 1
    one_device = tasks.shape([_record(1, strategy={"class": "MirroredStrategy", "replicas": 1, "devices": ["/gpu:0"]})])
    assert tasks.replica(one_device, 0).mode == "process"  # its only replica is the whole process
    for shape, index, count in ((workers, 2, 2), (mirrored, 5, 2), (tasks.shape([_record(1)]), 1, 1)):
        with pytest.raises(tasks.ReplicaRangeError, match=f"replica {index} is out of range: the run had {count} "):
            tasks.replica(shape, index)


def test_the_hook_keeps_the_task_and_the_cluster_shape_never_the_hosts() -> None:
    cluster = {"worker": ["10.0.0.1:2222", "10.0.0.2:2222"], "chief": ["h:1"]}
    config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 1}})
    found = hook.tf_config(config)
    assert found == {"cluster": {"chief": 1, "worker": 2}, "task": {"type": "worker", "index": 1}}
    assert "10.0.0" not in repr(found)
    assert hook.tf_config(None) == {} and hook.tf_config("  ") == {}
    assert hook.tf_config("{not json")["error"].startswith("TF_CONFIG is not JSON")
    assert hook.tf_config("[1]") == {"error": "TF_CONFIG is not a JSON object"}
    assert "not a count" in hook.tf_config('{"task": {"type": "worker", "index": "1"}}')["error"]
    assert hook.tf_config('{"task": {"type": "worker"}}') == {"task": {"type": "worker", "index": 0}}


def test_the_device_filter_matches_one_device_by_its_name() -> None:
    full = "/job:localhost/replica:0/task:0/device:CPU:1"
    assert dumpdiff.same_device(full, full) and dumpdiff.same_device(full, "/device:cpu:1")
    assert not dumpdiff.same_device(full, "/job:localhost/replica:0/task:0/device:CPU:0")
    assert not dumpdiff.same_device(full, "/job:worker/replica:0/task:1/device:CPU:1")
    assert not dumpdiff.same_device(None, full) and not dumpdiff.same_device(full, "")
    # The multi-device iterator's functions serve every device's shard: compared as a multiset, like tf.data's.
    assert dumpdiff._unordered(("graph", "_remote_next_func", "MultiDeviceIteratorGetNextFromShard", 0, 3))
    assert not dumpdiff._unordered(("graph", "one_step_on_data", "MatMul", 0, 3))
    handle = b"\x1a\x1dResource-18-at-0x562d716cc360 \xcc"
    assert dumpdiff._ADDRESS.sub(rb"\1ADDRESS", handle) == b"\x1a\x1dResource-18-at-ADDRESS \xcc"


def _bisect(replica: dict[str, Any] | None, first: dict[str, Any] | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {
        "command": ["python", "t.py"],
        "seed": 1,
        "steps": 3,
        "recipe": False,
        "tf_version": "2.21.0",
        "executions": [10, 10],
        "compared": 10,
        "unmatched": 0,
        "identical": first is None,
        "first_difference": first,
        "source": None,
        "recipe_table": [],
    }
    if replica is not None:
        data["replica"] = replica
    return data


def _replica(mode: str, note: str | None = None) -> dict[str, Any]:
    shape = tasks.shape(_workers()) if mode == "task" else tasks.shape([_record(1, strategy=MIRRORED)])
    chosen = tasks.replica(shape, 1)
    return {
        "index": 1,
        "of": 2,
        "mode": mode,
        "task": chosen.task.to_dict() if chosen.task else None,
        "chief": False,
        "device": chosen.device,
        "pids": [11, 31],
        "other_devices": [40, 41] if mode == "device" else None,
        "shape": shape.to_dict(),
        "shape_description": shape.describe(),
        "note": note,
    }


def test_bisect_says_which_replica_it_read() -> None:
    lines = bisect_lines(_bisect(_replica("task")))
    assert lines[1] == (
        "replica 1 of 2: worker 1 (pid 11 in run 1, 31 in run 2); each run: 2 processes (worker 0, worker 1), "
        "2 replicas (MultiWorkerMirroredStrategy)"
    )
    assert lines[-1].startswith("bit-identical: all 10")
    device = bisect_lines(_bisect(_replica("device")))
    assert device[1].startswith("replica 1 of 2: device /job:localhost/replica:0/task:0/device:CPU:1 of one process")
    assert device[2] == (
        "  compared only the op executions on /job:localhost/replica:0/task:0/device:CPU:1: 40 in run 1 and 41 in "
        "run 2 ran elsewhere"
    )
    assert replica_lines(_replica("task"))[0] == lines[1]
    assert not any(line.startswith("replica") for line in bisect_lines(_bisect(None)))  # a plain run: as before


def test_the_collective_note_appears_only_with_a_first_difference_there() -> None:
    first = {
        "kind": "graph",
        "graph": "step",
        "op_type": "CollectiveReduceV2",
        "op_name": "CollectiveReduceV2",
        "output_slot": 0,
        "index": 4,
        "difference": {"kind": "values", "dtype": "float32", "shape": [9], "elements": 9, "bit_equal": 8},
    }
    with_note = bisect_lines(_bisect(_replica("task", note="CollectiveReduceV2 combines ..."), first))
    assert "  CollectiveReduceV2 combines ..." in with_note and not any("bit-identical" in x for x in with_note)
    assert not any("combines" in x for x in bisect_lines(_bisect(_replica("task"), first)))


def test_the_study_line_names_the_processes_and_whose_numbers_count() -> None:
    workers = tasks.shape(_workers()).to_dict()
    assert distributed_line(workers, "step times") == (
        "each run: 2 processes (worker 0, worker 1), 2 replicas (MultiWorkerMirroredStrategy), every one run to "
        "its end; step times from worker 0, the chief"
    )
    assert distributed_line(workers, None, "; each time is the whole command's").endswith(
        "every one run to its end; each time is the whole command's"
    )
    mirrored = tasks.shape([_record(1, strategy=MIRRORED)]).to_dict()
    assert distributed_line(mirrored, "x") == (
        "each run: one process, 2 replicas (MirroredStrategy) on /job:localhost/replica:0/task:0/device:CPU:0, "
        "/job:localhost/replica:0/task:0/device:CPU:1"
    )


def test_a_shape_is_a_value() -> None:
    assert Shape().replace(replicas=2).replicas == 2 and not Shape().distributed
