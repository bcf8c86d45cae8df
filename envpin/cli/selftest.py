"""`envpin selftest`: is this TensorFlow bitwise deterministic, op by op, and what is its golden hash?"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from envpin.cli.options import Format, FormatOpt, JsonOpt, command_app, wants_json

selftest_app = command_app()


@selftest_app.command("selftest")
def selftest_cmd(
    compare: Annotated[bool, typer.Option("--compare", help="Also run the op battery with determinism off.")] = False,
    quick: Annotated[
        bool, typer.Option("--quick", help="One trial per op; hygiene checks only the hash seed.")
    ] = False,
    as_json: JsonOpt = False,
    fmt: FormatOpt = Format.text,
    hygiene_script: Annotated[
        Path | None,
        typer.Option("--hygiene-script", help="Check this training script's seeding (runs it twice)."),
    ] = None,
    python: Annotated[
        str | None,
        typer.Option("--python", help="Interpreter with TensorFlow that runs the tests (default: this one)."),
    ] = None,
) -> None:
    """Check, per op, that this TensorFlow is bitwise deterministic; hash a golden training run.

    Exit 0: no problem found (the verdict says "passed", or "inconclusive" when no check could run here and
    no golden runs were compared); 1: an op differed between runs, the golden runs differed, or a seed-hygiene
    finding; 2: TensorFlow cannot be imported."""
    from envpin import api
    from envpin.views import console, selftest

    with console.progress("determinism self-test" + (" (quick)" if quick else "")) as update:
        update("TensorFlow children running")
        result = api.run_selftest(compare=compare, quick=quick, hygiene_script=hygiene_script, python=python)
    if wants_json(fmt, as_json):
        console.print_json(result)
    else:
        selftest.show(result, console.out())
    raise typer.Exit(1 if result["problems"] else 0)
