"""`envpin bisect`, `envpin study`, `envpin cost`, `envpin resume-check`: the user's training command, run
several times under envpin's hook (seeds through ENVPIN_SEED, the recipe, TensorFlow's debugger dumps, the
resume point), see docs/runs.md."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from envpin.cli.options import Format, FormatOpt, JsonOpt, PartitionOpt, command_app, output_file, wants_json

#: Everything after the first word of the command belongs to the command (its own -options included).
_COMMAND_SETTINGS = {"allow_interspersed_args": False}
CommandArg = Annotated[
    list[str], typer.Argument(metavar="COMMAND...", help="The training command to run.", show_default=False)
]
SeedOpt = Annotated[int, typer.Option("--seed", help="The seed (ENVPIN_SEED) of the fixed-seed runs.")]
KeepOpt = Annotated[Path | None, typer.Option("--keep", help="Keep logs and dumps in this new or empty folder.")]
TimeoutOpt = Annotated[
    float | None, typer.Option("--timeout", help="Stop a run after this many seconds (a finite number above 0).")
]
SlurmOpt = Annotated[
    bool,
    typer.Option(
        "--slurm",
        help="Run each run as one Slurm task (srun); the hook travels "
        "on srun's standard input, no shared storage needed.",
    ),
]
SlurmArgOpt = Annotated[
    list[str] | None,
    typer.Option("--slurm-arg", metavar="OPTION", help="Extra srun option, repeatable: --slurm-arg=--gres=gpu:1."),
]


class RecipeArms(str, Enum):
    """`study --recipe`: the runs without envpin's recipe, with it, or both."""

    off = "off"
    on = "on"
    both = "both"


bisect_app = command_app()


@bisect_app.command("bisect", context_settings=_COMMAND_SETTINGS)
def bisect_cmd(
    command: CommandArg,
    seed: SeedOpt = 42,
    steps: Annotated[
        int | None, typer.Option("--steps", help="Stop each run after this many Keras training steps.")
    ] = 10,
    whole: Annotated[bool, typer.Option("--whole-run", help="Do not stop the runs early.")] = False,
    max_ops: Annotated[
        int | None, typer.Option("--max-ops", help="Compare at most this many op executions (1 or more).")
    ] = None,
    recipe: Annotated[bool, typer.Option("--recipe", help="Apply envpin's determinism recipe in both runs.")] = False,
    op_regex: Annotated[
        str | None, typer.Option("--op-regex", help="Dump only ops whose type matches (TensorFlow's op_regex).")
    ] = None,
    reader_python: Annotated[
        str | None,
        typer.Option(
            "--reader-python",
            help="Python with TensorFlow that compares the dumps (default: the second run's own process, as it "
            "ends, else the Python that made them; needed when they ran in a container).",
        ),
    ] = None,
    replica: Annotated[
        int | None,
        typer.Option(
            "--replica",
            metavar="K",
            help="Of a distributed command, compare replica K's dumps: task K of a run of several TF_CONFIG "
            "processes (default: the chief), or device K of one process's strategy (default: 0).",
        ),
    ] = None,
    keep: KeepOpt = None,
    timeout: TimeoutOpt = None,
    as_json: JsonOpt = False,
    fmt: FormatOpt = Format.text,
) -> None:
    """Run the command twice with the same seed under TensorFlow's debugger and name the first op whose
    output differs, the line that created it and what envpin's recipe table says about it.

    Exit 0: the runs were bit-identical in every op execution compared; 1: they differ; 2: the command
    or its TensorFlow cannot be observed (bisect needs TensorFlow 2.2 or later: 2.1's debugger dumps
    cannot be read back)."""
    from envpin import api
    from envpin.views import console, runs

    with console.progress("bisect") as update:
        result = api.bisect_runs(
            command,
            seed=seed,
            steps=None if whole else steps,
            max_ops=max_ops,
            recipe=recipe,
            op_regex=op_regex,
            keep=keep,
            timeout=timeout,
            reader_python=reader_python,
            replica=replica,
            progress=update,
        )
    data = result.to_dict()
    if wants_json(fmt, as_json):
        console.print_json(data)
    else:
        runs.show_bisect(data, console.out())
    raise typer.Exit(0 if result.identical else 1)


study_app = command_app()


@study_app.command("study", context_settings=_COMMAND_SETTINGS)
def study_cmd(
    command: CommandArg,
    runs: Annotated[int, typer.Option("--runs", "-n", help="Runs per arm (fixed, varied seeds), 2 to 1000.")] = 5,
    seed: SeedOpt = 42,
    recipe: Annotated[
        RecipeArms, typer.Option("--recipe", help="Without envpin's recipe, with it, or both.")
    ] = RecipeArms.off,
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="Runs at once, 1 to 1000.")] = 1,
    html: Annotated[
        Path | None,
        typer.Option(
            "--html",
            parser=output_file,
            metavar="FILE",
            help="Write the figure (self-contained HTML, inline SVG) here.",
        ),
    ] = None,
    svg: Annotated[
        Path | None,
        typer.Option("--svg", parser=output_file, metavar="FILE", help="Write the same panels as one SVG image here."),
    ] = None,
    keep: KeepOpt = None,
    timeout: TimeoutOpt = None,
    slurm: SlurmOpt = False,
    partition: PartitionOpt = None,
    slurm_args: SlurmArgOpt = None,
    as_json: JsonOpt = False,
    fmt: FormatOpt = Format.text,
) -> None:
    """How much of the run-to-run spread is nondeterminism: N runs with every seed fixed against N with
    the seed varied (ENVPIN_SEED), per metric the standard deviations and their ratio with a bootstrap
    interval. Metrics: Keras History, or a last stdout line {"envpin_metrics": {...}}.

    Exit 0: measured; 2: a run failed or reported no metrics."""
    from envpin import api
    from envpin.views import console
    from envpin.views.runs import show_study

    _check_figures(html, svg, keep)
    with console.progress("study") as update:
        result = api.study_runs(
            command,
            runs=runs,
            seed=seed,
            recipe=recipe.value,
            jobs=jobs,
            keep=keep,
            timeout=timeout,
            progress=update,
            slurm=slurm,
            partition=partition,
            slurm_args=slurm_args,
        )
    data = result.to_dict()
    _write_figures(data, html, svg)
    if wants_json(fmt, as_json):
        console.print_json(data)
    else:
        show_study(data, console.out())


def _check_figures(html: Path | None, svg: Path | None, keep: Path | None) -> None:
    """--html and --svg checked before any run starts (the figure is written once the last run has ended,
    minutes later): check_output_file refuses a folder, a socket or a missing folder; a FIFO is refused too
    (a descriptor such as /dev/stdout is written into), and so are two options naming one path."""
    import contextlib
    import os
    import stat

    from envpin.errors import UsageError
    from envpin.files.write import check_output_file

    for path, option in ((html, "--html"), (svg, "--svg")):
        if path is None:
            continue
        check_output_file(path, option.removeprefix("--"))
        with contextlib.suppress(OSError):
            if stat.S_ISFIFO(os.stat(path).st_mode) and not str(path).startswith("/dev/"):
                raise UsageError(
                    f"{option}: {path} is a FIFO; the figure is written only once every run has ended",
                    hint=f"choose a regular file for {option}",
                )
    if html is not None and svg is not None and html.resolve() == svg.resolve():
        raise UsageError(f"--html and --svg name the same file {html}", hint="name two different files")
    for path, option in ((html, "--html"), (svg, "--svg")):
        if path is not None and keep is not None and path.resolve() == keep.resolve():
            raise UsageError(
                f"{option} and --keep name the same path {path}",
                hint=f"--keep is a folder for the runs' logs: write {option} to a file beside or in it",
            )


def _write_figures(data: dict[str, Any], html: Path | None, svg: Path | None) -> None:
    """The study's picture where --html (a page) and --svg (one image) ask for it, each written whole or not
    at all."""
    from envpin.files.write import atomic_write
    from envpin.views.figures import page, sheet

    if html is not None:
        atomic_write(html, page(data).encode("utf-8"), make_parents=False)
    if svg is not None:
        atomic_write(svg, sheet(data).encode("utf-8"), make_parents=False)


cost_app = command_app()


@cost_app.command("cost", context_settings=_COMMAND_SETTINGS)
def cost_cmd(
    command: CommandArg,
    repeat: Annotated[
        int, typer.Option("--repeat", "-r", help="Runs per arm (without, with the recipe), 2 to 1000.")
    ] = 3,
    seed: SeedOpt = 42,
    keep: KeepOpt = None,
    timeout: TimeoutOpt = None,
    slurm: SlurmOpt = False,
    partition: PartitionOpt = None,
    slurm_args: SlurmArgOpt = None,
    as_json: JsonOpt = False,
    fmt: FormatOpt = Format.text,
) -> None:
    """What determinism costs: time per Keras training step (else per run) without and with envpin's
    recipe, alternating runs, with the overhead and a bootstrap interval.

    Exit 0: measured; 2: a run failed."""
    from envpin import api
    from envpin.views import console, runs

    with console.progress("cost") as update:
        result = api.cost_runs(
            command,
            repeat=repeat,
            seed=seed,
            keep=keep,
            timeout=timeout,
            progress=update,
            slurm=slurm,
            partition=partition,
            slurm_args=slurm_args,
        )
    if wants_json(fmt, as_json):
        console.print_json(result.to_dict())
    else:
        runs.show_cost(result.to_dict(), console.out())


resume_app = command_app()


@resume_app.command("resume-check", context_settings=_COMMAND_SETTINGS)
def resume_cmd(
    command: CommandArg,
    steps: Annotated[
        int,
        typer.Option(
            "--steps",
            "-k",
            metavar="K",
            help="Interrupt the second run as the step after K training steps begins (1 or more).",
        ),
    ] = 2,
    seed: SeedOpt = 42,
    keep: KeepOpt = None,
    timeout: TimeoutOpt = None,
    as_json: JsonOpt = False,
    fmt: FormatOpt = Format.text,
) -> None:
    """Does a run resumed from its checkpoint match an uninterrupted one? Runs the command uninterrupted,
    interrupted after K steps, and again with the interrupted run's checkpoint folder kept
    ($ENVPIN_RUNS_CHECKPOINT, or {checkpoint} in the command), compares the ends bitwise and names each part
    of the training state the resumed run did not get back (weights, optimizer slots, the tf.data iterator,
    random generators), with what to do about it.

    Exit 0: the resumed run ended bit-identical to the uninterrupted one; 1: it did not, or it did not
    resume; 2: the command cannot be checked (a run failed, no checkpoint written, K never reached)."""
    from envpin import api
    from envpin.views import console, runs

    with console.progress("resume-check") as update:
        result = api.resume_check(command, steps=steps, seed=seed, keep=keep, timeout=timeout, progress=update)
    data = result.to_dict()
    if wants_json(fmt, as_json):
        console.print_json(data)
    else:
        runs.show_resume(data, console.out())
    raise typer.Exit(0 if result.identical else 1)
