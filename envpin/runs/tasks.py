"""One run of a distributed command, read from its hook records: which process was which task of TF_CONFIG,
which of them is the chief, whether every worker ran to its end, how many replicas the run had, and which
process (or, in one process, which device) "replica K" means.

A run is one of three shapes. A plain run: one training process without TF_CONFIG or a tf.distribute strategy
over several devices. One process with a strategy over several devices (MirroredStrategy over GPUs, or over a
CPU split into logical devices): replica K is the strategy's K-th device. Several processes, each a task of
TF_CONFIG's cluster (MultiWorkerMirroredStrategy, started by a launcher or by srun): replica K is the task
TensorFlow numbers K (the chief first, then the workers by index: `multi_worker_util.id_in_cluster`), and the
chief is TF_CONFIG's `chief` task, else worker 0 (`multi_worker_util.is_chief`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from envpin.record import Value

#: The jobs whose tasks train (MultiWorkerMirroredStrategy's): each of them must have run for a run to count.
#: Other jobs a cluster may list (an evaluator, parameter servers) are recorded, not required.
TRAINING_JOBS = ("chief", "worker")


@dataclass(frozen=True, slots=True, order=True)
class Task(Value):
    """One task of TF_CONFIG's cluster."""

    type: str
    index: int

    @property
    def label(self) -> str:
        return f"{self.type} {self.index}"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "index": self.index}


def task_of(record: Mapping[str, Any]) -> Task | None:
    """The task a record's process was, from its TF_CONFIG (None when it had none, or one without a task)."""
    task = record.get("task")
    if not isinstance(task, Mapping):
        return None
    kind, index = task.get("type"), task.get("index")
    if not isinstance(kind, str) or not isinstance(index, int) or isinstance(index, bool) or index < 0:
        return None
    return Task(kind, index)


def main_record(records: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Of the records of processes that imported TensorFlow, the one that trained: the most Keras steps, then
    the first started (a helper process that imports TensorFlow too, such as a data loader, trains less)."""
    with_tf = [r for r in records if r.get("tf_version")]
    if not with_tf:
        return None
    return dict(sorted(with_tf, key=lambda r: (-len(r.get("step_seconds", ())), r.get("started", 0)))[0])


def by_task(records: Sequence[Mapping[str, Any]]) -> dict[Task, dict[str, Any]]:
    """Each task's record (of several processes with one task, `main_record`'s), in task order."""
    groups: dict[Task, list[Mapping[str, Any]]] = {}
    for record in records:
        task = task_of(record)
        if task is not None and record.get("tf_version"):
            groups.setdefault(task, []).append(record)
    found = {}
    for task in sorted(groups):
        chosen = main_record(groups[task])
        if chosen is not None:
            found[task] = chosen
    return found


def clusters(records: Sequence[Mapping[str, Any]]) -> list[dict[str, int]]:
    """The distinct cluster shapes ({job: task count}) the tasks' records saw, in first-seen order."""
    seen: list[dict[str, int]] = []
    for record in by_task(records).values():
        cluster = record.get("cluster")
        if isinstance(cluster, Mapping):
            shape = {str(k): int(v) for k, v in sorted(cluster.items()) if isinstance(v, int)}
            if shape not in seen:
                seen.append(shape)
    return seen


def training_tasks(cluster: Mapping[str, int]) -> list[Task]:
    """The cluster's training tasks in TensorFlow's replica order: the chief, then the workers by index."""
    tasks = [Task("chief", i) for i in range(min(1, int(cluster.get("chief", 0))))]
    return tasks + [Task("worker", i) for i in range(int(cluster.get("worker", 0)))]


def chief(cluster: Mapping[str, int]) -> Task | None:
    """TF_CONFIG's chief: its `chief` task, else worker 0 (MultiWorkerMirroredStrategy's rule)."""
    tasks = training_tasks(cluster)
    return tasks[0] if tasks else None


@dataclass(frozen=True, slots=True)
class Shape(Value):
    """What a run was: its training processes and replicas. Runs of different shapes measure different things
    (another reduction order, another per-replica batch) and are never compared."""

    #: The training tasks seen, in replica order (empty for one process without TF_CONFIG).
    tasks: tuple[Task, ...] = ()
    #: TF_CONFIG's cluster: each job and how many tasks it has.
    cluster: tuple[tuple[str, int], ...] = ()
    #: The replica count of the strategy the (chief's) process created, None when it created none envpin saw.
    replicas: int | None = None
    #: That strategy's class and its devices (for one process: where each replica ran).
    strategy: str | None = None
    devices: tuple[str, ...] = ()

    @property
    def processes(self) -> int:
        return max(1, len(self.tasks))

    @property
    def distributed(self) -> bool:
        """More than a plain one-process run: TF_CONFIG's tasks, or a strategy the script created."""
        return bool(self.tasks) or self.strategy is not None

    @property
    def chief(self) -> Task | None:
        return chief(dict(self.cluster)) if self.tasks else None

    def key(self) -> tuple[Any, ...]:
        """What must be equal for two runs to be compared."""
        return (self.tasks, self.cluster, self.replicas, self.strategy, len(self.devices))

    def describe(self) -> str:
        """The shape in words: 'one process', '2 processes (worker 0, worker 1)', with the replicas."""
        if self.tasks:
            names = ", ".join(t.label for t in self.tasks)
            where = f"{len(self.tasks)} processes ({names})" if len(self.tasks) > 1 else f"1 process ({names})"
        else:
            where = "one process"
        if self.replicas is None:
            return where + ", no tf.distribute strategy seen"
        return where + f", {self.replicas} replica{'s' if self.replicas != 1 else ''} ({self.strategy})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "processes": self.processes,
            "tasks": [t.to_dict() for t in self.tasks],
            "cluster": dict(self.cluster),
            "chief": self.chief.to_dict() if self.chief else None,
            "replicas": self.replicas,
            "strategy": self.strategy,
            "devices": list(self.devices),
        }


def shape(records: Sequence[Mapping[str, Any]]) -> Shape:
    """The run's shape from its records (the strategy and devices from the chief's record, or the main one)."""
    tasks = by_task(records)
    seen = clusters(records)
    cluster = seen[0] if len(seen) == 1 else {}
    training = [t for t in training_tasks(cluster) if t in tasks] if cluster else []
    if tasks and not training:  # tasks without a cluster envpin can read: each as it came
        training = [t for t in tasks if t.type in TRAINING_JOBS]
    head = chief(cluster) if cluster else None
    record = tasks.get(head) if head is not None else None
    if record is None:
        record = main_record(records)
    strategy = (record or {}).get("strategy")
    if not isinstance(strategy, Mapping):
        strategy = None
    return Shape(
        tasks=tuple(training),
        cluster=tuple(sorted(cluster.items())),
        replicas=int(strategy["replicas"]) if strategy and isinstance(strategy.get("replicas"), int) else None,
        strategy=str(strategy.get("class")) if strategy else None,
        devices=tuple(str(d) for d in (strategy.get("devices") or ())) if strategy else (),
    )


def chief_record(records: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The record whose metrics and times speak for the run: the chief's when the processes were tasks of
    TF_CONFIG, else `main_record`'s."""
    tasks = by_task(records)
    seen = clusters(records)
    head = chief(seen[0]) if len(seen) == 1 else None
    if head is not None and head in tasks:
        return tasks[head]
    return main_record(records)


def problems(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """Why a distributed run did not run whole, one sentence per cause (empty for a whole run, and for a run
    whose processes had no TF_CONFIG task: a plain run fails by its exit status alone)."""
    tasks = by_task(records)
    if not tasks:
        return []
    found = []
    seen = clusters(records)
    if len(seen) > 1:
        shapes = " and ".join(", ".join(f"{n} {job}" for job, n in s.items()) or "none" for s in seen)
        found.append(f"its processes saw different clusters in TF_CONFIG ({shapes})")
    elif seen:
        missing = [t.label for t in training_tasks(seen[0]) if t not in tasks]
        if missing:
            total = len(training_tasks(seen[0]))
            found.append(
                f"{', '.join(missing)} of the {total} training tasks of TF_CONFIG left no record (it did not "
                "start, did not import TensorFlow, or ended without Python's shutdown: killed, os._exit)"
            )
    return found + raised(records)


def raised(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each task whose process ended with an exception, as a sentence (the hook's sys.excepthook saw it)."""
    return [
        f"{task.label} (pid {record.get('pid')}) raised {record['uncaught']}"
        for task, record in by_task(records).items()
        if record.get("uncaught")
    ]


@dataclass(frozen=True, slots=True)
class Replica(Value):
    """Which part of a run `replica` K names: a task's process, or one device of a one-process strategy."""

    index: int
    #: How many replicas there are to choose from (tasks, or the strategy's devices; 1 for a plain run).
    of: int
    #: "task", "device" or "process" (a plain run: the whole process).
    mode: str
    task: Task | None = None
    device: str | None = None

    def describe(self) -> str:
        if self.mode == "task" and self.task is not None:
            return f"replica {self.index} of {self.of}: {self.task.label} (one process of {self.of})"
        if self.mode == "device":
            return f"replica {self.index} of {self.of}: device {self.device} (one process)"
        return f"replica {self.index} of {self.of}: the one process (no tf.distribute replicas)"


class ReplicaRangeError(ValueError):
    """`replica` K names no replica of the run (its message says how many there are)."""


def replicas(run_shape: Shape) -> int:
    """How many replicas `replica` may name in a run of this shape."""
    if len(run_shape.tasks) > 1:
        return len(run_shape.tasks)
    if run_shape.replicas is not None and run_shape.replicas > 1 and len(run_shape.devices) > 1:
        return len(run_shape.devices)
    return 1


def replica(run_shape: Shape, index: int | None) -> Replica:
    """Replica `index` of a run (None: the chief, or replica 0), or ReplicaRangeError."""
    count = replicas(run_shape)
    if index is not None and not 0 <= index < count:
        raise ReplicaRangeError(
            f"replica {index} is out of range: the run had {count} ({run_shape.describe()}), numbered 0 to {count - 1}"
        )
    if len(run_shape.tasks) > 1:
        if index is None:
            head = run_shape.chief
            index = run_shape.tasks.index(head) if head in run_shape.tasks else 0
        return Replica(index, count, "task", task=run_shape.tasks[index])
    if count > 1:
        index = index or 0
        return Replica(index, count, "device", device=run_shape.devices[index])
    return Replica(0, 1, "process", task=run_shape.tasks[0] if run_shape.tasks else None)
