"""Options shared by several commands, declared once."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer


def command_app(**settings: Any) -> typer.Typer:
    """The Typer app of one command (or command group) of envpin.cli.COMMANDS: help and errors as the root
    shows them (click's plain help, no rich markup, no pretty tracebacks), no completion options of its own."""
    return typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False, **settings)


class Format(str, Enum):
    """What a command prints on stdout."""

    text = "text"
    json = "json"


class Gpus(str, Enum):
    """`probe --image --gpus`: ask the host (auto), insist, or none."""

    auto = "auto"
    all = "all"
    none = "none"


class Engine(str, Enum):
    """`build --engine`."""

    auto = "auto"
    docker = "docker"
    podman = "podman"


class Resolver(str, Enum):
    """`lock --resolver`."""

    auto = "auto"
    image = "image"
    host = "host"


class Severity(str, Enum):
    """`audit --fail-on`."""

    error = "error"
    warning = "warning"
    info = "info"


class Flavor(str, Enum):
    """`catalog --flavor`: the NGC tag flavors."""

    py2 = "py2"
    py3 = "py3"
    tf1 = "tf1"
    tf1_py2 = "tf1-py2"
    tf2 = "tf2"


def output_file(value: str | Path) -> Path:
    """The parser of every option that names one file to write. `newdir/` is refused: the user means a folder,
    and as a Path it would lose its slash and become a file named `newdir`."""
    if isinstance(value, str) and value.endswith("/"):
        raise typer.BadParameter(
            f"{value!r} ends with '/', so it names a folder; this option writes one file (name the file inside it)"
        )
    return Path(value)


def value(choice: Enum | None) -> str | None:
    """An option's plain string for envpin.api (which takes strings, like any Python caller)."""
    return None if choice is None else str(choice.value)


def check_quick(selftest: bool | None, quick: bool) -> None:
    """--quick with --no-selftest: the option would shorten a self-test that does not run (a UsageError)."""
    if quick and selftest is False:
        from envpin.errors import UsageError

        raise UsageError(
            "--quick shortens the self-test, which --no-selftest leaves out", hint="drop --quick, or --no-selftest"
        )


def wants_json(fmt: Format, as_json: bool) -> bool:
    """--format json, or its older spelling --json."""
    return as_json or fmt is Format.json


TfOpt = Annotated[str | None, typer.Option("--tf", help="TensorFlow version: 2, 2.1 or 2.1.0.")]
NgcOpt = Annotated[str, typer.Option("--ngc", help="NGC release or tag: 20.02 or 20.02-tf2-py3.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Same as --format json.")]
FormatOpt = Annotated[Format, typer.Option("--format", help="text (tables and lines) or json (canonical JSON).")]
ReqOpt = Annotated[
    Path | None, typer.Option("--requirements", help="Locked requirements (== pins and --hash) to install.")
]
BaseOpt = Annotated[
    str | None,
    typer.Option(
        "--base-image",
        help="Build FROM this mirror of the base image (the lock keeps the "
        "upstream name: nvcr.io, or Docker Hub for a stock image).",
    ),
]
CaOpt = Annotated[Path | None, typer.Option("--ca-bundle", help="PEM CA bundle to trust inside the image.")]
OutOpt = Annotated[Path | None, typer.Option("--out", help="Environment folder (default images/<name>).")]
NameOpt = Annotated[str | None, typer.Option("--name", help="Environment name (default <release>-<flavor>).")]
ForceOpt = Annotated[bool, typer.Option("--force", help="Overwrite files that were edited by hand.")]
LockOpt = Annotated[Path | None, typer.Option("--lock", help="envpin.lock to use (default: found as build finds it).")]
PartitionOpt = Annotated[
    str | None, typer.Option("--partition", metavar="P", help="Slurm partition (default: the default one).")
]
QuickOpt = Annotated[bool, typer.Option("--quick", help="The short self-test battery.")]
#: `fleet probe` and `fleet selftest`: the nodes are reached through an allocation (salloc, then srun in it).
FleetSlurmOpt = Annotated[bool, typer.Option("--slurm", help="Reach the nodes through Slurm (salloc + srun).")]
SallocArgOpt = Annotated[
    list[str] | None,
    typer.Option("--slurm-arg", metavar="OPTION", help="Extra salloc option, repeatable: --slurm-arg=--account=ml."),
]
