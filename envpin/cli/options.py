"""Options shared by several commands, declared once."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

TfOpt = Annotated[str | None, typer.Option("--tf", help="TensorFlow version: 2, 2.1 or 2.1.0.")]
NgcOpt = Annotated[str, typer.Option("--ngc", help="NGC release or tag: 20.02 or 20.02-tf2-py3.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON on stdout instead of a table.")]
ReqOpt = Annotated[
    Path | None, typer.Option("--requirements", help="Locked requirements (== pins and --hash) to install.")
]
BaseOpt = Annotated[
    str | None, typer.Option("--base-image", help="Build FROM this mirror of the NGC image (lock keeps nvcr.io).")
]
CaOpt = Annotated[Path | None, typer.Option("--ca-bundle", help="PEM CA bundle to trust inside the image.")]
OutOpt = Annotated[Path | None, typer.Option("--out", help="Environment folder (default images/<name>).")]
NameOpt = Annotated[str | None, typer.Option("--name", help="Environment name (default <release>-<flavor>).")]
ForceOpt = Annotated[bool, typer.Option("--force", help="Overwrite files that were edited by hand.")]
LockOpt = Annotated[Path | None, typer.Option("--lock", help="envpin.lock to use (default: found as build finds it).")]
