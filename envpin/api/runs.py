"""`envpin bisect`, `envpin study`, `envpin cost`, `envpin resume-check`: the user's own training command, run
several times."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from envpin.errors import UsageError, param

TYPE_CHECKING = False  # typing's, without importing typing
if TYPE_CHECKING:
    from envpin.record import ProgressCallback
    from envpin.runs.bisect import BisectResult
    from envpin.runs.cost import CostResult
    from envpin.runs.launch import Srun
    from envpin.runs.resume import ResumeResult
    from envpin.runs.study import StudyResult


@contextlib.contextmanager
def _workdir(keep: Path | None) -> Iterator[Path]:
    """Where the runs write their logs and dumps: `keep` (new or empty, left in place), else a temporary
    folder removed afterwards."""
    if keep is None:
        folder = Path(tempfile.mkdtemp(prefix="envpin-runs-"))
        try:
            yield folder
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        return
    from envpin.files.write import check_output_path

    check_output_path(keep, "keep")
    if keep.exists() and (not keep.is_dir() or any(keep.iterdir())):
        raise UsageError(f"{param('keep')} {keep} exists and is not an empty folder", hint="name a new or empty folder")
    keep.mkdir(exist_ok=True)
    yield keep


def _command(command: list[str], slurm: Srun | None = None) -> list[str]:
    from envpin.runs.launch import check_command

    return check_command(command, slurm)


def _srun(slurm: bool, partition: str | None, slurm_args: list[str] | None) -> Srun | None:
    """`slurm` with its partition and extra srun options, or None (the runs start here)."""
    if not slurm:
        if partition is not None or slurm_args:
            raise UsageError(
                f"{param('partition')} and {param('slurm_args')} need {param('slurm')}",
                hint=f"add {param('slurm')}, or drop them",
            )
        return None
    from envpin.runs.launch import Srun

    for arg in slurm_args or ():
        if not arg.startswith("-"):
            raise UsageError(
                f"{param('slurm_args')} {arg!r} is not an srun option",
                hint=f"pass one srun option each time, with its value: {param('slurm_args')}=--gres=gpu:1",
            )
    return Srun(partition=partition, options=tuple(slurm_args or ()))


def _check_regex(op_regex: str) -> None:
    """`op_regex` compiled now (TensorFlow's debugger compiles it with Python's re): a bad one would only
    fail inside both runs."""
    import re

    try:
        re.compile(op_regex)
    except re.error as exc:
        raise UsageError(
            f"{param('op_regex')} {op_regex!r} is not a valid regular expression: {exc}",
            hint=f"pass a Python regular expression of op types, e.g. {param('op_regex')} 'MatMul|BiasAdd'",
        ) from None


def _interpreter(python: str) -> str:
    """`reader_python`: a name found on PATH, or a path to a regular executable file."""
    import os
    import stat

    if os.sep not in python:
        found = shutil.which(python)
        if found is None:
            raise UsageError(
                f"{param('reader_python')}: {python} not found on PATH", hint="pass the path of a python executable"
            )
        return found
    try:
        mode = os.stat(python).st_mode
    except OSError as exc:
        raise UsageError(
            f"{param('reader_python')}: {python} not found ({exc.strerror or exc})",
            hint="pass the path of a python executable",
        ) from None
    if not stat.S_ISREG(mode) or not os.access(python, os.X_OK):
        kind = (
            "a folder"
            if stat.S_ISDIR(mode)
            else "a FIFO"
            if stat.S_ISFIFO(mode)
            else "a file without execute permission"
            if stat.S_ISREG(mode)
            else "a special file"
        )
        raise UsageError(
            f"{param('reader_python')}: {python} is {kind}, not a regular executable file",
            hint="pass the path of a python executable",
        )
    return python


def bisect_runs(
    command: list[str],
    *,
    seed: int = 42,
    steps: int | None = 10,
    max_ops: int | None = None,
    recipe: bool = False,
    op_regex: str | None = None,
    keep: Path | None = None,
    timeout: float | None = None,
    reader_python: str | None = None,
    replica: int | None = None,
    progress: ProgressCallback | None = None,
) -> BisectResult:
    """Run `command` twice with the same seed under TensorFlow's debugger; the first op that differs. Of a
    distributed command, one replica's dumps are compared: `replica` K is task K of a run of several
    TF_CONFIG tasks (default: the chief), or device K of a one-process strategy (default: 0)."""
    from envpin.runs.bisect import bisect
    from envpin.runs.launch import check_count, check_seed, check_timeout

    if replica is not None:  # a replica the runs do not have is known only once the first has run
        check_count(
            replica,
            "replica",
            low=0,
            high=None,
            hint=f"pass {param('replica')} K, a replica numbered from 0, or leave it out for the chief",
        )
    check_seed(seed)
    if steps is not None:
        check_count(steps, "steps", high=None, hint="pass the number of training steps to record")
    if max_ops is not None:
        check_count(
            max_ops,
            "max_ops",
            high=None,
            hint="pass how many op executions to compare (1 or more), or leave it out for all",
        )
    check_timeout(timeout)
    if op_regex is not None:
        _check_regex(op_regex)
    if reader_python is not None:
        reader_python = _interpreter(reader_python)
    args = _command(command)
    with _workdir(keep) as root:
        result = bisect(
            args,
            root,
            seed=seed,
            steps=steps,
            max_ops=max_ops,
            recipe=recipe,
            op_regex=op_regex,
            timeout=timeout,
            reader_python=reader_python,
            replica=replica,
            progress=progress,
        )
    if keep is None:
        result.dumps = []  # removed with the temporary work folder: only dumps kept in `keep` are named
    return result


def study_runs(
    command: list[str],
    *,
    runs: int = 5,
    seed: int = 42,
    recipe: str = "off",
    jobs: int = 1,
    keep: Path | None = None,
    timeout: float | None = None,
    progress: ProgressCallback | None = None,
    slurm: bool = False,
    partition: str | None = None,
    slurm_args: list[str] | None = None,
) -> StudyResult:
    """`runs` runs with every seed fixed against `runs` with the seed varied (with the recipe off, on or
    both). With `slurm` each run is one Slurm task (srun, with `partition` and the extra srun options
    `slurm_args`). The study's picture is drawn from the result by envpin.views.figures."""
    from envpin.runs.study import study

    recipes = {"off": (False,), "on": (True,), "both": (False, True)}.get(recipe)
    if recipes is None:
        raise UsageError(
            f"{param('recipe')} must be off, on or both, not {recipe!r}", hint=f"pass {param('recipe')} off|on|both"
        )
    from envpin.runs.launch import check_count, check_seed, check_timeout

    check_count(
        runs,
        "runs",
        low=2,
        hint=f"a spread needs at least 2 runs per arm: pass {param('runs')} 2 or more (5 or more is better)",
    )
    check_seed(seed, varied=runs)
    check_count(jobs, "jobs", hint="pass the number of runs to make at once")
    check_timeout(timeout)
    srun = _srun(slurm, partition, slurm_args)
    args = _command(command, srun)
    with _workdir(keep) as root:
        return study(
            args, root, runs=runs, seed=seed, recipes=recipes, jobs=jobs, timeout=timeout, progress=progress, slurm=srun
        )


def cost_runs(
    command: list[str],
    *,
    repeat: int = 3,
    seed: int = 42,
    keep: Path | None = None,
    timeout: float | None = None,
    progress: ProgressCallback | None = None,
    slurm: bool = False,
    partition: str | None = None,
    slurm_args: list[str] | None = None,
) -> CostResult:
    """Time the command without and with envpin's recipe, `repeat` times each, alternately (each run one
    Slurm task with `slurm`)."""
    from envpin.runs.cost import cost
    from envpin.runs.launch import check_count, check_seed, check_timeout

    check_seed(seed)
    check_count(
        repeat, "repeat", low=2, hint=f"an interval needs at least 2 runs per arm: pass {param('repeat')} 2 or more"
    )
    check_timeout(timeout)
    srun = _srun(slurm, partition, slurm_args)
    args = _command(command, srun)
    with _workdir(keep) as root:
        return cost(args, root, repeat=repeat, seed=seed, timeout=timeout, progress=progress, slurm=srun)


def resume_check(
    command: list[str],
    *,
    steps: int = 2,
    seed: int = 42,
    keep: Path | None = None,
    timeout: float | None = None,
    progress: ProgressCallback | None = None,
) -> ResumeResult:
    """Run `command` uninterrupted, interrupted as the step after `steps` steps begins, and resumed from the
    interrupted run's checkpoint folder; compare the resumed run with the uninterrupted one bitwise and name
    each part of the training state that was not restored (envpin.runs.resume)."""
    from envpin.runs.launch import check_count, check_seed, check_timeout
    from envpin.runs.resume import resume_check as check

    check_count(
        steps,
        "steps",
        high=None,
        hint=f"pass {param('steps')} K, the training steps before the interruption (1 or more)",
    )
    check_seed(seed)
    check_timeout(timeout)
    args = _command(command)
    with _workdir(keep) as root:
        return check(args, root, steps=steps, seed=seed, timeout=timeout, progress=progress)
