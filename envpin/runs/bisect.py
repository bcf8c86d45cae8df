"""`envpin bisect`: run a command twice with the same seeds under TensorFlow's debugger and name the first
op execution whose output differs, where the script created it, and what the recipe table says about it."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, TypeGuard

from envpin.errors import param, shown
from envpin.record import ProgressCallback, ProgressEvent, Value
from envpin.runs import tasks
from envpin.runs.launch import Run, RunError, RunSpec, check_seeded, failed, run_all, same_shape, unseeded

#: Path fragments of frames that belong to Python, TensorFlow, Keras or envpin's hook, not to the script.
_NO_READER = 3  # dumpdiff.py's exit status when its TensorFlow has no DebugDataReader
_LIBRARY = re.compile(r"(site-packages|dist-packages|/lib/python[0-9.]+/|<frozen |/sitecustomize\.py$|^<)")


@dataclass(slots=True)
class BisectResult(Value):
    """Where two runs with the same seeds first differ, or that they did not in what was compared."""

    command: list[str]
    seed: int
    steps: int | None
    recipe: bool
    tf_version: str | None
    python: str | None
    executions: list[int]
    compared: int
    unmatched: int
    unmatched_data: int
    first: dict[str, Any] | None
    frame: dict[str, Any] | None
    notes: list[dict[str, Any]] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    dumps: list[str] = field(default_factory=list)
    #: Which replica's dumps were compared (a distributed command, or `replica` given), else None.
    replica: dict[str, Any] | None = None

    @property
    def identical(self) -> bool:
        """True only when every compared op execution was bit-identical and each op execution outside tf.data
        had its counterpart in the other run (prefetching may run a few more tf.data calls in one of them)."""
        return self.first is None and self.unmatched == 0 and self.compared > 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "seed": self.seed,
            "steps": self.steps,
            "recipe": self.recipe,
            "tf_version": self.tf_version,
            "python": self.python,
            "executions": self.executions,
            "compared": self.compared,
            "unmatched": self.unmatched,
            "unmatched_data": self.unmatched_data,
            "identical": self.identical,
            "first_difference": self.first,
            "source": self.frame,
            "recipe_table": self.notes,
            "seconds": [round(s, 3) for s in self.seconds],
            "dumps": self.dumps,
            **({"replica": self.replica} if self.replica is not None else {}),
        }


def user_frame(stack: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The innermost frame of the user's own code (not Python's, TensorFlow's, Keras's or the hook's)."""
    for frame in reversed(list(stack)):
        if not _LIBRARY.search(str(frame.get("file", ""))):
            return dict(frame)
    return None


def _device_class(device: str | None) -> str | None:
    if not device:
        return None
    low = device.lower()
    return "gpu" if ":gpu:" in low else "cpu" if ":cpu:" in low else None


def table_notes(op_type: str, tf_version: str | None, device: str | None) -> list[dict[str, Any]]:
    """What envpin's recipe table says about an op type on this TensorFlow (and device, when known)."""
    from envpin.knowledge import recipes
    from envpin.portable.versions import major_minor
    from envpin.probe.runtime import within

    if not op_type:
        return []
    word = re.compile(r"(?<![A-Za-z0-9])" + re.escape(op_type) + r"(?![A-Za-z0-9])")
    mm = major_minor(tf_version)
    where = _device_class(device)
    book = recipes.book()
    notes = []
    for kind, entries in (("nondeterministic", book.silent), ("raises", book.raises)):
        for e in entries:
            if not word.search(e.op):
                continue
            if mm is not None and not within(mm, e.tf_min, e.tf_max):
                continue
            if where is not None and e.devices not in ("any", where):
                continue
            source = book.sources.get(e.source, {})
            notes.append(
                {
                    "kind": kind,
                    "op": e.op,
                    "devices": e.devices,
                    "tf_min": e.tf_min,
                    "tf_max": e.tf_max,
                    "detail": e.why or f"{e.exception}: {e.message}",
                    "source": source.get("url", e.source),
                }
            )
    return notes


def _program(root: Path) -> Path:
    """dumpdiff.py in a folder of its own: run as a script, its folder comes first on sys.path, and envpin/runs
    holds bisect.py, which would shadow the standard library's bisect module that TensorFlow imports."""
    folder = root / "reader"
    folder.mkdir(exist_ok=True)
    program = folder / "dumpdiff.py"
    program.write_bytes((resources.files("envpin.runs") / "dumpdiff.py").read_bytes())
    return program


def _usable(result: Any) -> TypeGuard[dict[str, Any]]:
    """Whether `result` is a comparison's result (dumpdiff.diff's dict)."""
    return isinstance(result, dict) and {"executions", "compared", "unmatched"} <= set(result)


def _asked(run: Run, chosen: tasks.Replica, max_ops: int | None, root: Path) -> str | None:
    """What the second run's hook compares as it ends (RunSpec.compare): the first run's dump of the replica
    chosen, against its own, with the TensorFlow the run has loaded. None when the first run has no dump to
    compare (refused after the second run, as before)."""
    try:
        dump, _ = _dump_of(run, chosen)
    except RunError:
        return None
    task = chosen.task.to_dict() if chosen.mode == "task" and chosen.task is not None else None
    device = chosen.device if chosen.mode == "device" else None
    ask = {"program": str(_program(root)), "dump": dump, "task": task, "device": device, "max_ops": max_ops}
    return json.dumps(ask, sort_keys=True)


def _compared(record: dict[str, Any], dump_a: str) -> dict[str, Any] | None:
    """The comparison the second run's hook made as the run ended, or None when it made none against
    `dump_a` (ENVPIN_RUNS_COMPARE did not reach it: a container that passes only the variables it names)."""
    comparison = record.get("comparison")
    if not isinstance(comparison, dict) or comparison.get("dump") != dump_a:
        return None
    if comparison.get("error") is not None:
        raise RunError(
            f"comparing the dumps failed (at the end of run 2): {shown(str(comparison['error']), 300)}",
            hint=f"re-run with {param('keep')} DIR and open the dumps with TensorFlow's DebugDataReader",
        )
    result = comparison.get("result")
    if not _usable(result):
        raise RunError(
            f"comparing the dumps gave no result envpin can read: {shown(json.dumps(result), 200)}",
            hint=f"re-run with {param('keep')} DIR and open the dumps with TensorFlow's DebugDataReader",
        )
    return dict(result)


def _reader(
    python: str, a: str, b: str, max_ops: int | None, timeout: float | None, root: Path, device: str | None = None
) -> dict[str, Any]:
    """Run the dump comparison on `python` (it imports TensorFlow's reader), from the program's own folder."""
    program = _program(root)
    args = [python, str(program), a, b] + (["--max-ops", str(max_ops)] if max_ops is not None else [])
    args += ["--device", device] if device is not None else []
    try:
        proc = subprocess.run(args, capture_output=True, text=True, errors="replace", timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RunError(
            f"comparing the dumps took longer than {param('timeout')} ({timeout:g} s)",
            hint=f"raise {param('timeout')}, or compare less: {param('max_ops')} N, fewer {param('steps')}, "
            f"{param('op_regex')}",
        ) from None
    except OSError as exc:
        raise RunError(
            f"cannot compare the dumps: {python}: {exc.strerror or exc}",
            hint="check that the run's Python still starts",
        ) from exc
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    errors = [shown(line.strip(), 300) for line in proc.stderr.strip().splitlines()]
    if proc.returncode == _NO_READER:  # dumpdiff's own line comes last (a wrapper may print before it)
        raise RunError(
            f"{python} cannot read TensorFlow's debugger dumps: {''.join(errors[-1:])}",
            hint=f"pass {param('reader_python')} with a Python whose TensorFlow is 2.2 or later",
        )
    if proc.returncode != 0:
        tail = " | ".join(errors[-3:])
        raise RunError(
            f"comparing the dumps failed (exit {proc.returncode}): {tail}",
            hint=f"re-run with {param('keep')} DIR and open the dumps with TensorFlow's DebugDataReader",
        )
    try:
        result = json.loads(lines[-1]) if lines else None
    except ValueError:
        result = None
    if not _usable(result):
        last = (proc.stdout.strip().splitlines() or ["nothing"])[-1]
        raise RunError(
            f"comparing the dumps gave no result envpin can read: {shown(last, 200)}",
            hint=f"{param('reader_python')} must run the program it is given, with a Python whose TensorFlow is 2.2 "
            "or later",
        )
    return result


def _dump_of(run: Run, chosen: tasks.Replica | None = None) -> tuple[str, dict[str, Any]]:
    """The dump of the run's training process (of replica `chosen`'s task, in a run of several tasks)."""
    record = run.tf_record
    if chosen is not None and chosen.mode == "task" and chosen.task is not None:
        record = tasks.by_task(run.records).get(chosen.task)
    if record is None:
        raise RunError(
            "the command never imported TensorFlow in a Python envpin could observe",
            hint="run a Python training script (e.g. python train.py); the hook is found through "
            "PYTHONPATH, which the command must not reset",
        )
    if not record.get("dump"):
        errors = "; ".join(record.get("errors") or ()) or "no reason recorded"
        raise RunError(
            f"TensorFlow's debugger dump could not be enabled: {errors}",
            hint="check that the command's TensorFlow is 2.2 or later",
        )
    return str(record["dump"]), record


#: What a bisect reports done/total of: its two runs, then the comparison of their dumps.
_STEPS = 3


def bisect(
    command: list[str],
    root: Path,
    *,
    seed: int = 42,
    steps: int | None = 10,
    max_ops: int | None = None,
    recipe: bool = False,
    op_regex: str | None = None,
    timeout: float | None = None,
    reader_python: str | None = None,
    replica: int | None = None,
    progress: ProgressCallback | None = None,
) -> BisectResult:
    """Two runs with seed `seed` (and the recipe if asked), dumped for `steps` Keras steps, compared by the
    second run's own process as it ends (its TensorFlow is loaded already), or by `reader_python` when given
    (and by the Python that made the dumps when the second run made no comparison). Of a distributed
    command, the dumps of one replica are compared: `replica` K (default: the chief, or replica 0), see
    envpin.runs.tasks."""
    specs = [
        RunSpec(label=f"run {i + 1}", seed=seed, recipe=recipe, dump=True, steps=steps, op_regex=op_regex)
        for i in range(2)
    ]

    def report(step: str | None, completed: int) -> None:
        """Three steps: the two runs, then the comparison of their dumps."""
        if progress is not None:
            progress(ProgressEvent("bisect", step, completed=completed, total=_STEPS, unit="steps"))

    def second(event: ProgressEvent) -> None:
        """The second run's own count (0 before it, 1 once it ended) is the bisect's 1 or 2 of its steps."""
        if event.completed:
            report(None, 2)

    runs = run_all(
        command,
        specs[:1],
        root,
        jobs=1,
        timeout=timeout,
        progress=None if progress is None else (lambda event: report(None, event.completed or 0)),
    )
    # a replica the first run did not have is known then: the second run is not made
    if not (_partial(runs[0]) or unseeded(runs[0]) is not None or _chosen(runs[0], replica) is None):
        asked = None if reader_python is not None else _asked(runs[0], _replica(runs[0], replica), max_ops, root)
        runs += run_all(
            command,
            [specs[1].replace(compare=asked)],
            root,
            jobs=1,
            timeout=timeout,
            progress=None if progress is None else second,
            first=1,
        )
    for run in runs:
        if _partial(run):
            raise failed(run)
    for run in runs:
        check_seeded(run)
    chosen = _replica(runs[0], replica)
    shape = same_shape(runs)
    (dump_a, record), (dump_b, record_b) = _dump_of(runs[0], chosen), _dump_of(runs[1], chosen)
    device = chosen.device if chosen.mode == "device" else None
    report("comparing the two dumps op by op", len(specs))
    found = None if reader_python is not None else _compared(record_b, dump_a)
    if found is None:
        python = reader_python or str(record["python"])
        if reader_python is None and not Path(python).exists():
            raise RunError(
                f"the dumps were made by {python}, which does not exist here (the runs ran in a container?)",
                hint=f"pass {param('reader_python')} with a Python of this machine that has TensorFlow 2.2 or later",
            )
        found = _reader(python, dump_a, dump_b, max_ops, timeout, root, device)
    report("dumps compared", _STEPS)
    if not found["executions"] or not any(found["executions"]):
        where = f" on {device}" if device else ""
        raise RunError(
            f"TensorFlow {record.get('tf_version')}'s debugger dumped no op execution{where} in either run",
            hint="check that the command runs TensorFlow ops after it imports TensorFlow "
            f"({param('op_regex')} may match no op type)"
            + (f"; the strategy's devices are {', '.join(shape.devices)}" if device else ""),
        )
    first = found.get("first_difference")
    # Nothing compared and no op execution left without its counterpart: neither identical nor different. (Op
    # executions outside tf.data without a counterpart mean the runs took different paths: "not identical".)
    if int(found["compared"]) == 0 and not first and int(found["unmatched"]) == 0:
        raise RunError(
            f"nothing was compared: run 1 executed {found['executions'][0]} ops and run 2 "
            f"{found['executions'][1]}, but none could be compared ({found['unmatched']} without a "
            f"counterpart in the other run, {found.get('skipped', 0)} unreadable or uninitialised)",
            hint=f"record more of the runs (raise {param('steps')}, or record the whole run), or widen "
            f"{param('op_regex')}",
        )
    frame = user_frame(first["stack"]) if first else None
    if first:  # the user's frames, and the innermost one (where TensorFlow created the op)
        stack = first["stack"]
        first["stack"] = [f for f in stack[:-1] if not _LIBRARY.search(f["file"])] + stack[-1:]
    tf_version = record.get("tf_version") or found.get("tf_version")
    device = (first.get("device") or ("/device:CPU:0" if _no_gpu(runs) else None)) if first else None
    notes = table_notes(first["op_type"], tf_version, device) if first else []
    return BisectResult(
        command=list(command),
        seed=seed,
        steps=steps,
        recipe=recipe,
        tf_version=tf_version,
        python=record.get("python"),
        executions=list(found["executions"]),
        compared=int(found["compared"]),
        unmatched=int(found["unmatched"]),
        unmatched_data=int(found.get("unmatched_data", 0)),
        first=first,
        frame=frame,
        notes=notes,
        seconds=[r.seconds for r in runs],
        dumps=[dump_a, dump_b],
        replica=_said(chosen, shape, [record, record_b], found, first)
        if shape.distributed or replica is not None
        else None,
    )


def _chosen(run: Run, index: int | None) -> tasks.Replica | None:
    """Replica `index` of `run`, or None when the run has no such replica."""
    try:
        return tasks.replica(run.shape, index)
    except tasks.ReplicaRangeError:
        return None


def _replica(run: Run, index: int | None) -> tasks.Replica:
    """Replica `index` of the first run, or the error that says which replicas there are."""
    try:
        return tasks.replica(run.shape, index)
    except tasks.ReplicaRangeError as exc:
        raise RunError(
            str(exc),
            hint=f"pass {param('replica')} between 0 and {tasks.replicas(run.shape) - 1}, or leave it out for the "
            "chief (replica 0 of one process)",
        ) from None


#: Op types that combine the values of every replica (TensorFlow's collectives and NCCL's all-reduce).
_COLLECTIVE = re.compile(r"^(Collective|Nccl)")


def _said(
    chosen: tasks.Replica,
    shape: tasks.Shape,
    records: Sequence[dict[str, Any]],
    found: dict[str, Any],
    first: dict[str, Any] | None,
) -> dict[str, Any]:
    """Which replica was read, for the report: its index, what it is (a task and its pids, or a device) and
    the run's shape; when its first difference is a collective, that it came from another replica."""
    note = None
    if first and _COLLECTIVE.match(str(first.get("op_type"))) and chosen.of > 1:
        others = " or ".join(str(i) for i in range(chosen.of) if i != chosen.index)
        note = (
            f"{first['op_type']} combines the values of every replica, and nothing compared before it on this "
            f"replica differed: the difference came in from another replica (compare {param('replica')} {others})"
        )
    return {
        "index": chosen.index,
        "of": chosen.of,
        "mode": chosen.mode,
        "task": chosen.task.to_dict() if chosen.task is not None else None,
        "chief": chosen.task is not None and chosen.task == shape.chief,
        "device": chosen.device,
        "pids": [r.get("pid") for r in records],
        "other_devices": found.get("other_devices"),
        "description": chosen.describe(),
        "shape": shape.to_dict(),
        "shape_description": shape.describe(),
        "note": note,
    }


def _partial(run: Run) -> bool:
    """A run that failed before its steps were done: it dumped a partial run, and comparing it would mislead."""
    return run.failed and (run.tf_record is None or not run.tf_record.get("stopped_after_steps"))


def _no_gpu(runs: Sequence[Run]) -> bool:
    """True when the runs' TensorFlow saw no GPU (recorded by the hook), so an op without a device ran on CPU."""
    return all(not (r.tf_record or {}).get("gpus") for r in runs)
