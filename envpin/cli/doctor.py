"""`envpin doctor`: before pulling, can this host run the image?"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from envpin.cli.options import Format, FormatOpt, JsonOpt, command_app, wants_json

doctor_app = command_app()


@doctor_app.command("doctor")
def doctor_cmd(
    ngc: Annotated[
        str | None, typer.Option("--ngc", help="NGC release or tag to check: 22.06 or 22.06-tf2-py3.")
    ] = None,
    lock: Annotated[
        Path | None, typer.Option("--lock", help="Check the image of this envpin.lock (or folder holding one).")
    ] = None,
    stock: Annotated[
        str | None,
        typer.Option("--stock", metavar="TAG", help="Stock TensorFlow GPU image to check: 2.20 or 2.20.0-gpu."),
    ] = None,
    as_json: JsonOpt = False,
    fmt: FormatOpt = Format.text,
) -> None:
    """Before pulling: can this host run the image? Docker, NVIDIA runtime/CDI, driver, GPUs.

    Exit 0: will run (possibly through forward compatibility); 1: will not run; 3: cannot tell; 2: bad input.
    Without --ngc/--stock/--lock, the envpin.lock of the current directory is used.
    """
    from envpin import api
    from envpin.views import console, doctor

    diagnosis = api.diagnose_host(ngc=ngc, lock=lock, stock=stock)
    if wants_json(fmt, as_json):
        console.print_json(diagnosis.to_json())
    else:
        doctor.diagnosis(diagnosis, console.out())
    raise typer.Exit(diagnosis.exit_code)
