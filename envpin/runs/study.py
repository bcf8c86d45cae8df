"""`envpin study`: Morin & Willetts on the user's model. N runs with every seed fixed and N with the seed
varied; per metric, the spread of each arm and the fixed/varied ratio of standard deviations: the part of
the run-to-run spread that remains when only nondeterminism is left.

The statistics are plain Python (no NumPy on the host): sample standard deviation, and a percentile
bootstrap interval for the ratio drawn from a seeded generator, so the same runs give the same report.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
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

#: Bootstrap resamples and the seed of their generator (fixed: the interval is part of the report).
BOOTSTRAP = 2000
BOOTSTRAP_SEED = 20200911


def non_finite(values: Sequence[float]) -> int:
    """How many values are nan or inf (a diverged loss, a metric divided by zero): such a metric has no spread."""
    return sum(1 for v in values if not math.isfinite(v))


def as_json_number(value: float) -> float | str:
    """A metric value for the JSON report: nan and inf as the strings 'nan', 'inf', '-inf' (JSON has no such
    numbers)."""
    return value if math.isfinite(value) else str(value)


def std(values: Sequence[float]) -> float:
    """Sample standard deviation; exactly 0.0 when every value is the same float (no rounding residue)."""
    if len(values) < 2 or len(set(values)) == 1:
        return 0.0
    mean = math.fsum(values) / len(values)
    return math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1))


def ratio(fixed: Sequence[float], varied: Sequence[float]) -> float | None:
    """std(fixed) / std(varied); None when the varied arm does not spread at all, or a value is nan or inf."""
    if non_finite(fixed) or non_finite(varied):
        return None
    s_varied = std(varied)
    return None if s_varied == 0 else std(fixed) / s_varied


def bootstrap_ci(
    fixed: Sequence[float],
    varied: Sequence[float],
    level: float = 0.95,
    resamples: int = BOOTSTRAP,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of the ratio, each arm resampled on its own; None if undefined."""
    if len(fixed) < 2 or len(varied) < 2 or non_finite(fixed) or non_finite(varied):
        return None
    rng = random.Random(seed)
    found = []
    for _ in range(resamples):
        r = ratio([rng.choice(fixed) for _ in fixed], [rng.choice(varied) for _ in varied])
        if r is not None:
            found.append(r)
    if len(found) < resamples // 2:
        return None
    found.sort()
    lo = found[math.floor((1 - level) / 2 * (len(found) - 1))]
    hi = found[math.ceil((1 + level) / 2 * (len(found) - 1))]
    return lo, hi


#: Said instead of a share of nondeterminism when envpin's hook seeded nothing: the seed reached the runs only
#: if the command read ENVPIN_SEED itself, which envpin cannot see.
_UNSEEDED = (
    "envpin's hook seeded nothing in these runs (none imported TensorFlow where it could see): that is "
    "nondeterminism only if the command seeds itself from ENVPIN_SEED"
)


def verdict(name: str, fixed: Sequence[float], varied: Sequence[float], seeded: bool = True) -> str:
    """The ratio in words; 'exactly' only when every fixed-seed run gave the same finite float; a metric with a
    nan or inf in any run is reported as such, never as a spread. Without `seeded` (the hook seeded no run)
    a spread of the fixed-seed runs is not called nondeterminism: the command may never have read its seed."""
    bad = non_finite(list(fixed) + list(varied))
    if bad:
        return (
            f"{name}: {bad} of {len(fixed) + len(varied)} runs gave a value that is not a finite number (nan "
            "or inf): no spread or ratio can be measured for it"
        )
    if len(fixed) < 2:
        return f"{name}: too few fixed-seed runs to measure a spread"
    if std(fixed) == 0:
        return (
            f"{name}: all {len(fixed)} fixed-seed runs gave exactly the same value: nondeterminism "
            "adds nothing to its spread here"
        )
    r = ratio(fixed, varied)
    if not seeded:
        spread = (
            "varying the seed did not change it, yet fixed-seed runs differ"
            if r is None
            else f"with the seed fixed it still spreads {percent(r)} as much as with seeds varied"
        )
        return f"{name}: {spread}; {_UNSEEDED}"
    if r is None:
        return (
            f"{name}: varying the seed did not change it, yet fixed-seed runs differ: the spread comes "
            "from nondeterminism alone"
        )
    share = "most of" if r >= 0.5 else "a sizeable part of" if r >= 0.2 else "a small part of"
    return (
        f"{name}: with every seed fixed it still spreads {percent(r)} as much as with seeds varied: "
        f"nondeterminism causes {share} the run-to-run spread"
    )


def percent(r: float) -> str:
    """A ratio as a percentage with two significant digits (0.0069 -> '0.69%'), never rounded to '0%'."""
    return f"{r * 100:.2g}%" if r < 0.1 else f"{r:.0%}"


@dataclass(slots=True)
class MetricStats(Value):
    """One metric in one comparison: the values of each arm and what they say."""

    name: str
    recipe: bool
    fixed: list[float]
    varied: list[float]
    #: Whether envpin's hook seeded every run of these arms (each imported TensorFlow where it could see).
    seeded: bool = True

    def to_dict(self) -> dict[str, Any]:
        r = ratio(self.fixed, self.varied)
        ci = bootstrap_ci(self.fixed, self.varied)
        return {
            "metric": self.name,
            "recipe": self.recipe,
            "fixed": _arm(self.fixed),
            "varied": _arm(self.varied),
            "non_finite": non_finite(self.fixed) + non_finite(self.varied),
            "ratio": r,
            "ratio_ci95": list(ci) if ci else None,
            "seeded_by_envpin": self.seeded,
            "verdict": verdict(self.name, self.fixed, self.varied, self.seeded),
        }


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _arm(values: Sequence[float]) -> dict[str, Any]:
    """One arm in the report: mean and std only when every value is finite."""
    finite = not non_finite(values)
    return {
        "n": len(values),
        "mean": _mean(values) if finite else None,
        "std": std(values) if finite else None,
        "values": [as_json_number(v) for v in values],
    }


@dataclass(slots=True)
class StudyResult(Value):
    """Every run's metrics and, per metric and recipe setting, the comparison of the two arms."""

    command: list[str]
    runs: int
    seed: int
    recipes: list[bool]
    metrics: list[MetricStats] = field(default_factory=list)
    per_run: list[dict[str, Any]] = field(default_factory=list)
    tf_version: str | None = None
    #: What every run was (processes, replicas); said in the report only for a distributed command.
    shape: tasks.Shape | None = None

    def to_dict(self) -> dict[str, Any]:
        data = {
            "command": self.command,
            "runs_per_arm": self.runs,
            "seed": self.seed,
            "recipe": self.recipes,
            "tf_version": self.tf_version,
            "metrics": [m.to_dict() for m in self.metrics],
            "runs": self.per_run,
        }
        if self.shape is not None and self.shape.distributed:
            data["distributed"] = self.shape.to_dict()
        return data


def plan(runs: int, seed: int, recipes: Sequence[bool]) -> list[RunSpec]:
    """The runs of each arm: `fixed` all with `seed`, `varied` with seed+1 ... seed+runs."""
    specs = []
    for recipe in recipes:
        tag = " recipe" if recipe else ""
        specs += [RunSpec(label=f"fixed{tag} {i + 1}", seed=seed, recipe=recipe) for i in range(runs)]
        specs += [RunSpec(label=f"varied{tag} {i + 1}", seed=seed + 1 + i, recipe=recipe) for i in range(runs)]
    return specs


def summarise(runs: Sequence[Run], recipes: Sequence[bool]) -> list[MetricStats]:
    """Per metric (that every run reported) and recipe setting, the values of the two arms."""
    names = sorted(set.intersection(*(set(r.metrics) for r in runs))) if runs else []
    stats = []
    for recipe in recipes:
        arm = [r for r in runs if r.spec.recipe == recipe]
        seeded = all(r.tf_record is not None for r in arm)  # the hook seeds a process once it imports TensorFlow
        for name in names:
            fixed = [r.metrics[name] for r in arm if r.spec.label.startswith("fixed")]
            varied = [r.metrics[name] for r in arm if r.spec.label.startswith("varied")]
            stats.append(MetricStats(name=name, recipe=recipe, fixed=fixed, varied=varied, seeded=seeded))
    return stats


def study(
    command: list[str],
    root: Path,
    *,
    runs: int = 5,
    seed: int = 42,
    recipes: Sequence[bool] = (False,),
    jobs: int = 1,
    timeout: float | None = None,
    progress: ProgressCallback | None = None,
    slurm: Srun | None = None,
) -> StudyResult:
    """Run both arms (per recipe setting) and compare them metric by metric (each run a Slurm task with
    `slurm`)."""
    if runs < 2:
        raise UsageError(
            "a spread needs at least 2 runs per arm", hint=f"pass {param('runs')} 2 or more (5 or more is better)"
        )
    done = run_all(
        command,
        plan(runs, seed, recipes),
        root,
        jobs=jobs,
        timeout=timeout,
        progress=progress,
        slurm=slurm,
        fatal=_stops(),
    )
    for run in done:
        if run.failed:
            raise failed(run)
    for run in done:
        check_seeded(run)
    shape = same_shape(done)
    if not any(run.metrics for run in done):
        raise UsageError(
            "the command reported no metrics",
            hint='print a last line {"envpin_metrics": {"accuracy": 0.91}} or train with Keras fit() (its '
            "History is read), see docs/runs.md",
        )
    stats = summarise(done, recipes)
    if not stats:
        raise UsageError("no metric was reported by every run", hint="report the same metric names in every run")
    record = next((r.tf_record for r in done if r.tf_record), None)
    distributed = shape.distributed
    return StudyResult(
        command=list(command),
        runs=runs,
        seed=seed,
        recipes=list(recipes),
        metrics=stats,
        per_run=[
            {
                "label": r.spec.label,
                "seed": r.spec.seed,
                "recipe": r.spec.recipe,
                "seconds": round(r.seconds, 3),
                "metrics": {k: as_json_number(v) for k, v in r.metrics.items()},
                **(_processes(r) if distributed else {}),
            }
            for r in done
        ],
        tf_version=record.get("tf_version") if record else None,
        shape=shape,
    )


def _stops() -> Callable[[Run], bool]:
    """No further run starts once one is unusable or has another shape than the first."""
    changed = shape_changed()
    return lambda run: unusable(run) or changed(run)


def _processes(run: Run) -> dict[str, Any]:
    """A distributed run's processes in the report: each training task with its pid, and whose metrics count."""
    head = tasks.chief_record(run.records)
    processes = [{"task": t.to_dict(), "pid": r.get("pid")} for t, r in tasks.by_task(run.records).items()]
    if not processes and head is not None:  # one process: the one that trained
        processes = [{"task": None, "pid": head.get("pid")}]
    return {"processes": processes, "metrics_from_pid": head.get("pid") if head else None}
