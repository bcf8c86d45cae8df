"""`envpin bisect`, `envpin study`, `envpin cost`: the user's own training command, run several times."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from envpin.errors import UsageError

if TYPE_CHECKING:
    from envpin.runs.bisect import BisectResult
    from envpin.runs.cost import CostResult
    from envpin.runs.launch import Srun
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
    from envpin.fsutil import check_output_path

    check_output_path(keep, "--keep")
    if keep.exists() and (not keep.is_dir() or any(keep.iterdir())):
        raise UsageError(f"--keep {keep} exists and is not an empty folder", hint="name a new or empty folder")
    keep.mkdir(exist_ok=True)
    yield keep


def _command(command: list[str], slurm: Srun | None = None) -> list[str]:
    from envpin.runs.launch import check_command

    return check_command(command, slurm)


def _srun(slurm: bool, partition: str | None, slurm_args: list[str] | None) -> Srun | None:
    """`--slurm` with its partition and extra srun options, or None (the runs start here)."""
    if not slurm:
        if partition is not None or slurm_args:
            raise UsageError("--partition and --slurm-arg need --slurm", hint="add --slurm, or drop them")
        return None
    from envpin.runs.launch import Srun

    for arg in slurm_args or ():
        if not arg.startswith("-"):
            raise UsageError(f"--slurm-arg {arg!r} is not an srun option",
                             hint="pass one srun option each time, with its value: --slurm-arg=--gres=gpu:1")
    return Srun(partition=partition, options=tuple(slurm_args or ()))


def bisect_runs(command: list[str], *, seed: int = 42, steps: int | None = 10, max_ops: int | None = None,
                recipe: bool = False, op_regex: str | None = None, keep: Path | None = None,
                timeout: float | None = None, reader_python: str | None = None,
                progress: Callable[[str], None] | None = None) -> BisectResult:
    """Run `command` twice with the same seed under TensorFlow's debugger; the first op that differs."""
    from envpin.runs.bisect import bisect

    if steps is not None and steps < 1:
        raise UsageError("--steps must be 1 or more", hint="pass the number of training steps to record")
    if reader_python is not None:
        found = shutil.which(reader_python)
        if found is None:
            raise UsageError(f"interpreter {reader_python} not found", hint="pass the path of a python executable")
        reader_python = found
    args = _command(command)
    with _workdir(keep) as root:
        return bisect(args, root, seed=seed, steps=steps, max_ops=max_ops, recipe=recipe, op_regex=op_regex,
                      timeout=timeout, reader_python=reader_python, progress=progress)


def study_runs(command: list[str], *, runs: int = 5, seed: int = 42, recipe: str = "off", jobs: int = 1,
               html: Path | None = None, svg: Path | None = None, keep: Path | None = None,
               timeout: float | None = None, progress: Callable[[str], None] | None = None,
               slurm: bool = False, partition: str | None = None,
               slurm_args: list[str] | None = None) -> StudyResult:
    """`runs` runs with every seed fixed against `runs` with the seed varied (with the recipe off, on or
    both); the picture is written to `html` (a page) and `svg` (one image) when given. With `slurm` each
    run is one Slurm task (srun, with `partition` and the extra srun options `slurm_args`)."""
    from envpin.runs.study import study

    recipes = {"off": (False,), "on": (True,), "both": (False, True)}.get(recipe)
    if recipes is None:
        raise UsageError(f"--recipe must be off, on or both, not {recipe!r}", hint="pass --recipe off|on|both")
    if jobs < 1:
        raise UsageError("-j must be 1 or more", hint="pass the number of runs to make at once")
    from envpin.fsutil import check_output_path

    for path, option in ((html, "--html"), (svg, "--svg")):
        if path is not None:
            check_output_path(path, option)
    srun = _srun(slurm, partition, slurm_args)
    args = _command(command, srun)
    with _workdir(keep) as root:
        result = study(args, root, runs=runs, seed=seed, recipes=recipes, jobs=jobs, timeout=timeout,
                       progress=progress, slurm=srun)
    from envpin.fsutil import atomic_write
    from envpin.runs.figure import page, sheet

    if html is not None:
        atomic_write(html, page(result.to_dict()).encode("utf-8"))
    if svg is not None:
        atomic_write(svg, sheet(result.to_dict()).encode("utf-8"))
    return result


def cost_runs(command: list[str], *, repeat: int = 3, seed: int = 42, keep: Path | None = None,
              timeout: float | None = None, progress: Callable[[str], None] | None = None,
              slurm: bool = False, partition: str | None = None,
              slurm_args: list[str] | None = None) -> CostResult:
    """Time the command without and with envpin's recipe, `repeat` times each, alternately (each run one
    Slurm task with `slurm`)."""
    from envpin.runs.cost import cost

    srun = _srun(slurm, partition, slurm_args)
    args = _command(command, srun)
    with _workdir(keep) as root:
        return cost(args, root, repeat=repeat, seed=seed, timeout=timeout, progress=progress, slurm=srun)
