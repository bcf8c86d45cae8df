"""`envpin resume-check`: does a run resumed from its checkpoint match an uninterrupted one?

Three runs of the command, with the same seed: one uninterrupted; one that the hook ends as the step after
`steps` steps begins (as a preempted job ends: no exit handler, no further save); and the same command started
again with the interrupted run's checkpoint folder kept, so the script's own checkpointing decides what comes
back. The hook records the training state (envpin/runs/hook.py, `snapshot`) at that resume point and as each
process ends; the resumed run's state at its first step is compared, component by component, with the
uninterrupted run's after the same number of steps, and the two runs' ends bitwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envpin.errors import param
from envpin.record import ProgressCallback, ProgressEvent, Value
from envpin.runs.launch import (
    CHECKPOINT_VAR,
    CHECKPOINT_WORD,
    Run,
    RunError,
    RunSpec,
    check_seeded,
    failed,
    run_all,
)

#: Each component of the training state the hook records, in the order reports name them: its key in the
#: hook's snapshot, its name, and what to do when a resumed run did not get it back, with the sources read.
COMPONENTS: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    (
        "weights",
        "model weights",
        "put the model (or its variables) in the checkpoint: tf.train.Checkpoint(model=model); with Keras fit, "
        "keras.callbacks.BackupAndRestore restores the model's weights and the epoch",
        ("https://keras.io/api/callbacks/backup_and_restore",),
    ),
    (
        "optimizer_iterations",
        "optimizer iterations",
        "put the optimizer in the checkpoint (tf.train.Checkpoint(optimizer=optimizer)): its iterations drive "
        "the learning-rate schedule and, here, the step count",
        ("https://keras.io/api/callbacks/backup_and_restore",),
    ),
    (
        "optimizer_slots",
        "optimizer slots (momentum, Adam's moments)",
        "put the optimizer in the checkpoint and build it before restoring (optimizer.build(variables)), so "
        "that its slot variables exist for the restore to fill",
        ("https://keras.io/api/callbacks/backup_and_restore",),
    ),
    (
        "iterator",
        "the tf.data iterator (its position and shuffle buffer)",
        "put the iterator in the checkpoint, tf.train.Checkpoint(iterator=iterator): it saves the input "
        "pipeline's state, so a resumed run continues from where it left off instead of replaying the first "
        "batches (large shuffle or prefetch buffers make the checkpoint larger); Keras fit's own iterator "
        "cannot be checkpointed: BackupAndRestore redoes the interrupted epoch from its start",
        (
            "https://www.tensorflow.org/api_docs/python/tf/data/experimental/CheckpointInputPipelineHook",
            "https://www.tensorflow.org/versions/r2.14/api_docs/python/tf/data/experimental/make_saveable_from_iterator",
        ),
    ),
    (
        "generators",
        "tf.random.Generator states",
        "put each tf.random.Generator in the checkpoint (tf.train.Checkpoint(generator=g)): a Generator keeps "
        "its state in a tf.Variable that changes with every number drawn",
        ("https://www.tensorflow.org/api_docs/python/tf/random/Generator",),
    ),
    (
        "global_generator",
        "TensorFlow's global generator (tf.random.get_global_generator())",
        "make a tf.random.Generator of your own and checkpoint it, or put the global one in the checkpoint: its "
        "state is a tf.Variable that changes with every number drawn",
        ("https://www.tensorflow.org/api_docs/python/tf/random/Generator",),
    ),
    (
        "op_seeds",
        "the global seed's op seeds (random ops without a seed of their own)",
        "a restart replays the op seeds that tf.random.set_seed hands out: draw with stateless ops and the step "
        "in the seed (tf.random.stateless_uniform: the same arguments give the same numbers), or with a "
        "tf.random.Generator kept in the checkpoint",
        ("https://www.tensorflow.org/guide/random_numbers",),
    ),
    (
        "python_random",
        "Python's random",
        "save random.getstate() with the checkpoint and random.setstate() it when resuming",
        ("https://www.python.org/pipermail/python-checkins/2012-August/115514.html",),
    ),
    (
        "numpy_random",
        "NumPy's global generator (np.random)",
        "save np.random.get_state() with the checkpoint and np.random.set_state() it when resuming, or draw from "
        "a generator whose state you checkpoint",
        ("https://numpy.org/doc/stable/reference/random/legacy.html",),
    ),
)
NAMES = {key: name for key, name, _, _ in COMPONENTS}


@dataclass(slots=True)
class Component(Value):
    """One component of the training state at the resume point: restored, not restored, or not seen."""

    key: str
    name: str
    #: "restored", "not restored", "not seen" (the hook could not read it in one of the runs), or
    #: "nondeterministic" (two uninterrupted runs already differ in it at the resume point).
    status: str
    uninterrupted: str | None
    resumed: str | None
    advice: str = ""
    sources: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "name": self.name,
            "status": self.status,
            "uninterrupted": self.uninterrupted,
            "resumed": self.resumed,
            "advice": self.advice,
            "sources": list(self.sources),
        }


@dataclass(slots=True)
class ResumeResult(Value):
    """The three runs' verdict: identical, differs (naming what was not restored), or not resumed."""

    command: list[str]
    seed: int
    steps: int
    tf_version: str | None
    #: "identical", "differs", "not resumed" (the resumed run started from another step), "nondeterministic"
    #: (two uninterrupted runs differ by the resume point: nothing to say about the resume).
    verdict: str
    #: The step the resumed run started from (its steps done at its first step).
    resumed_from: int | None
    components: list[Component] = field(default_factory=list)
    #: Components whose end states differ (uninterrupted against resumed), and metrics that differ.
    end_differs: list[str] = field(default_factory=list)
    metrics_differ: list[str] = field(default_factory=list)
    run_seconds: list[float] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        return self.verdict == "identical"

    @property
    def not_restored(self) -> list[Component]:
        return [c for c in self.components if c.status == "not restored"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "seed": self.seed,
            "steps": self.steps,
            "tf_version": self.tf_version,
            "verdict": self.verdict,
            "identical": self.identical,
            "resumed_from": self.resumed_from,
            "components": [c.to_dict() for c in self.components],
            "not_restored": [c.key for c in self.not_restored],
            "end_differs": self.end_differs,
            "metrics_differ": self.metrics_differ,
            "run_seconds": self.run_seconds,
        }


def _resume_record(run: Run) -> dict[str, Any] | None:
    """The resume part of the record of the run's process that reached the resume point (else the first
    process that recorded one)."""
    found = [r["resume"] for r in run.records if isinstance(r.get("resume"), dict)]
    reached = [r for r in found if r.get("point")]
    chosen: dict[str, Any] | None = (reached or found or [None])[0]
    return chosen


def compare(
    uninterrupted: dict[str, Any],
    interrupted: dict[str, Any],
    resumed: dict[str, Any],
    metrics: tuple[dict[str, float], dict[str, float]] = ({}, {}),
) -> tuple[str, int | None, list[Component], list[str], list[str]]:
    """The verdict from the three runs' resume records (the hook's `resume`: point and end snapshots):
    (verdict, the step the resumed run started from, the components at the resume point, the components
    whose end states differ, the metrics that differ)."""
    point, again, first = uninterrupted["point"], interrupted["point"], resumed["point"]
    components = []
    for key, name, advice, sources in COMPONENTS:
        a, b, r = point.get(key), again.get(key), first.get(key)
        if a is None or r is None:
            status = "not seen"
        elif b is not None and a != b:
            status = "nondeterministic"
        else:
            status = "restored" if a == r else "not restored"
        shown = status in ("not restored", "nondeterministic")
        components.append(Component(key, name, status, a, r, advice if shown else "", sources if shown else ()))
    end_a, end_r = uninterrupted.get("end") or {}, resumed.get("end") or {}
    end_differs = [key for key, *_ in COMPONENTS if end_a.get(key) is not None and end_a.get(key) != end_r.get(key)]
    metrics_differ = sorted(k for k in set(metrics[0]) & set(metrics[1]) if metrics[0][k] != metrics[1][k])
    metrics_differ += sorted(set(metrics[0]) ^ set(metrics[1]))
    started = first.get("steps")
    if any(c.status == "nondeterministic" for c in components):
        verdict = "nondeterministic"
    elif started != point.get("steps"):
        verdict = "not resumed"
    elif end_differs or metrics_differ:
        verdict = "differs"
    else:
        verdict = "identical"
    return verdict, started, components, end_differs, metrics_differ


def _offset(progress: ProgressCallback | None, first: int, total: int) -> ProgressCallback | None:
    """`progress` hearing the runs of a later run_all call as runs first+1 ... of `total`."""
    if progress is None:
        return None

    def shifted(event: ProgressEvent) -> None:
        progress(event.replace(completed=first + (event.completed or 0), total=total))

    return shifted


def _checked(run: Run, what: str, steps: int) -> dict[str, Any]:
    """The run's resume record, or the error that says why there is none usable."""
    if run.failed and not (what == "interrupted" and run.interrupted):
        raise failed(run)
    check_seeded(run)
    record = _resume_record(run)
    if run.tf_record is None or record is None:
        raise RunError(
            f"the command never imported TensorFlow in a Python envpin could observe ({run.spec.label})",
            hint="check a TensorFlow training command (e.g. python train.py) that keeps PYTHONPATH",
        )
    if record.get("point") is None:
        raise RunError(
            f"the {what} run never began a step after {steps} steps done ({run.spec.label}): it trains fewer "
            "steps, or envpin cannot see its steps",
            hint=f"pass a smaller {param('steps')}; a custom training loop calls envpin.before_step(step, "
            "model=..., optimizer=..., iterator=...) at the top of each step (docs/runs.md)",
        )
    return record


def resume_check(
    command: Sequence[str],
    root: Path,
    *,
    steps: int,
    seed: int = 42,
    timeout: float | None = None,
    progress: ProgressCallback | None = None,
) -> ResumeResult:
    """Run the command uninterrupted, interrupted after `steps` steps, and resumed from the interrupted
    run's checkpoint folder (CHECKPOINT_VAR, and CHECKPOINT_WORD in the command); compare them."""
    fresh, kept = root / "checkpoint-uninterrupted", root / "checkpoint-resumed"
    fresh.mkdir()
    kept.mkdir()
    args = list(command)
    specs = [
        RunSpec(label="uninterrupted", seed=seed, resume=f"observe:{steps}", checkpoint=str(fresh)),
        RunSpec(label=f"interrupted after step {steps}", seed=seed, resume=f"stop:{steps}", checkpoint=str(kept)),
    ]
    runs = run_all(args, specs, root, timeout=timeout, progress=_offset(progress, 0, 3), fatal=lambda r: r.failed)
    if len(runs) < 2:  # the first failed: no further run was made
        raise failed(runs[0])
    uninterrupted = _checked(runs[0], "uninterrupted", steps)
    interrupted = _checked(runs[1], "interrupted", steps)
    if not runs[1].interrupted:
        raise RunError(f"the interrupted run was not stopped after step {steps}", hint="check the command")
    if not any(kept.iterdir()):
        raise RunError(
            f"the interrupted run wrote nothing to its checkpoint folder ({kept}): the script keeps its "
            "checkpoints elsewhere, or saves none before step " + str(steps + 1),
            hint=f"make the script write its checkpoints to ${CHECKPOINT_VAR}, or put {CHECKPOINT_WORD} in the "
            "command where its checkpoint folder goes (envpin gives each run its own)",
        )
    spec = RunSpec(label="resumed", seed=seed, resume=f"resumed:{steps}", checkpoint=str(kept))
    [again] = run_all(args, [spec], root, timeout=timeout, progress=_offset(progress, 2, 3), first=2)
    resumed = _checked(again, "resumed", steps)
    verdict, started, components, end_differs, metrics_differ = compare(
        uninterrupted, interrupted, resumed, (runs[0].metrics, again.metrics)
    )
    record = runs[0].tf_record or {}
    return ResumeResult(
        command=args,
        seed=seed,
        steps=steps,
        tf_version=record.get("tf_version"),
        verdict=verdict,
        resumed_from=started,
        components=components,
        end_differs=end_differs,
        metrics_differ=metrics_differ,
        run_seconds=[round(r.seconds, 3) for r in (*runs, again)],
    )
