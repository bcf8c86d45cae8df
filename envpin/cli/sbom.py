"""`envpin sbom`: the software bill of materials of the image built from a lock."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from envpin.cli.options import command_app, output_file

sbom_app = command_app()


class SbomFormat(str, Enum):
    """`sbom --format`."""

    cyclonedx = "cyclonedx"
    spdx = "spdx"


@sbom_app.command("sbom")
def sbom_cmd(
    lock: Annotated[
        Path | None,
        typer.Option(
            "--lock",
            help="The envpin.lock (or its folder); default: ./envpin.lock, else the only images/*/envpin.lock.",
        ),
    ] = None,
    fmt: Annotated[
        SbomFormat, typer.Option("--format", help="cyclonedx: CycloneDX 1.6 JSON; spdx: SPDX 2.3 JSON.")
    ] = SbomFormat.cyclonedx,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", parser=output_file, metavar="FILE", help="Write the SBOM here instead of stdout."
        ),
    ] = None,
) -> None:
    """The SBOM of the image built here from the lock: its base by digest, the NGC release, CUDA, cuDNN, NCCL,
    TensorRT and the driver minimum, the OS packages (dpkg) and the Python distributions, read inside the image.

    Exit 0: written; 2: bad input, no image built from the lock, or the evidence extra missing."""
    from envpin import api
    from envpin.views import console, evidence

    with console.progress("reading the lock's image") as update:
        res = api.image_sbom(lock, fmt=fmt.value, output=output, progress=update)
    evidence.sbom(res)
