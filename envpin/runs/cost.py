"""`envpin cost`: what determinism costs on this model and machine. The command runs `repeat` times without
and `repeat` times with envpin's recipe, alternately (so a change of machine load hits both alike), with
the same seed; the time per Keras training step (the median of a run, its first step left out: that one
traces the model) or, without Keras, per run, gives the overhead and a bootstrap interval."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envpin.errors import UsageError, param
from envpin.record import ProgressCallback, Value
from envpin.runs import tasks
from envpin.runs.launch import (
    Run,
    RunSpec,
    Srun,
    check_seeded,
    failed,
    run_all,
    same_shape,
    shape_changed,
    unusable,
)
from envpin.runs.study import BOOTSTRAP, BOOTSTRAP_SEED


def step_time(run: Run) -> float | None:
    """The median time of a run's Keras training steps after the first, or None with fewer than 2 steps (of
    the chief, in a run of several TF_CONFIG tasks: they step together)."""
    record = run.chief_record
    steps = list(record.get("step_seconds", ())) if record else []
    return statistics.median(steps[1:]) if len(steps) >= 2 else None


def overhead(off: Sequence[float], on: Sequence[float]) -> float:
    """mean(on) / mean(off) - 1."""
    return (math.fsum(on) / len(on)) / (math.fsum(off) / len(off)) - 1


def overhead_ci(
    off: Sequence[float],
    on: Sequence[float],
    level: float = 0.95,
    resamples: int = BOOTSTRAP,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of the overhead, each arm resampled on its own."""
    if len(off) < 2 or len(on) < 2:
        return None
    rng = random.Random(seed)
    found = sorted(overhead([rng.choice(off) for _ in off], [rng.choice(on) for _ in on]) for _ in range(resamples))
    return (found[math.floor((1 - level) / 2 * (resamples - 1))], found[math.ceil((1 + level) / 2 * (resamples - 1))])


@dataclass(slots=True)
class CostResult(Value):
    """Times of each arm and the overhead of the recipe."""

    command: list[str]
    repeat: int
    seed: int
    unit: str  # "step" or "run"
    off: list[float]
    on: list[float]
    run_seconds: dict[str, list[float]]
    tf_version: str | None
    recipe: str | None
    #: What every run was (processes, replicas); said in the report only for a distributed command.
    shape: tasks.Shape | None = None

    def to_dict(self) -> dict[str, Any]:
        ci = overhead_ci(self.off, self.on)
        data = {
            "command": self.command,
            "repeat": self.repeat,
            "seed": self.seed,
            "unit": self.unit,
            "tf_version": self.tf_version,
            "recipe": self.recipe,
            "without_recipe": {"mean": math.fsum(self.off) / len(self.off), "values": self.off},
            "with_recipe": {"mean": math.fsum(self.on) / len(self.on), "values": self.on},
            "overhead": overhead(self.off, self.on),
            "overhead_ci95": list(ci) if ci else None,
            "run_seconds": self.run_seconds,
        }
        if self.shape is not None and self.shape.distributed:
            data["distributed"] = self.shape.to_dict()
        return data


def cost(
    command: list[str],
    root: Path,
    *,
    repeat: int = 3,
    seed: int = 42,
    timeout: float | None = None,
    progress: ProgressCallback | None = None,
    slurm: Srun | None = None,
) -> CostResult:
    """Alternate runs without and with the recipe, one at a time (timings of parallel runs mean little)."""
    if repeat < 2:
        raise UsageError("an interval needs at least 2 runs per arm", hint=f"pass {param('repeat')} 2 or more")
    specs = []
    for i in range(repeat):
        specs += [
            RunSpec(label=f"without recipe {i + 1}", seed=seed),
            RunSpec(label=f"with recipe {i + 1}", seed=seed, recipe=True),
        ]
    changed = shape_changed()
    runs = run_all(
        command,
        specs,
        root,
        jobs=1,
        timeout=timeout,
        progress=progress,
        slurm=slurm,
        fatal=lambda run: unusable(run) or changed(run),
    )
    for run in runs:
        if run.failed:
            raise failed(run)
    for run in runs:
        check_seeded(run)
    shape = same_shape(runs)
    if not any(r.tf_record for r in runs if r.spec.recipe):
        raise UsageError(
            "the command never imported TensorFlow in a Python envpin could observe: the recipe had nothing to act on",
            hint="time a TensorFlow training command (e.g. python train.py)",
        )
    steps = [step_time(r) for r in runs]
    per_step = [s for s in steps if s is not None]
    unit = "step" if len(per_step) == len(runs) else "run"
    times = per_step if unit == "step" else [r.seconds for r in runs]
    off = [t for t, r in zip(times, runs, strict=False) if not r.spec.recipe]
    on = [t for t, r in zip(times, runs, strict=False) if r.spec.recipe]
    with_recipe = next((r.tf_record for r in runs if r.spec.recipe and r.tf_record), None)
    return CostResult(
        command=list(command),
        repeat=repeat,
        seed=seed,
        unit=unit,
        off=off,
        on=on,
        run_seconds={
            "without_recipe": [round(r.seconds, 3) for r in runs if not r.spec.recipe],
            "with_recipe": [round(r.seconds, 3) for r in runs if r.spec.recipe],
        },
        tf_version=with_recipe.get("tf_version") if with_recipe else None,
        recipe=(with_recipe.get("recipe") or {}).get("id") if with_recipe else None,
        shape=shape,
    )
