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
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout",
            metavar="SECONDS",
            help="CPU seconds each TensorFlow child may use (default: ENVPIN_SELFTEST_TIMEOUT or 600; wall 4x).",
        ),
    ] = None,
    replicas: Annotated[
        int | None,
        typer.Option(
            "--replicas",
            metavar="N",
            help="Also the multi-replica self-test: MirroredStrategy over N devices (every GPU, or the CPU split "
            "into N), and MultiWorkerMirroredStrategy over two workers on loopback.",
        ),
    ] = None,
) -> None:
    """Check, per op, that this TensorFlow is bitwise deterministic; hash a golden training run.

    Exit 0: no problem found (the verdict says "passed", or "inconclusive" when no check could run here and
    no golden runs were compared); 1: an op differed between runs, the golden runs differed, or a seed-hygiene
    finding, or replicas (or workers) that differ; 2: TensorFlow cannot be imported, or a child ran out of
    time (inconclusive: the result is printed and names it)."""
    from envpin import api
    from envpin.views import console, selftest

    with console.progress("determinism self-test" + (" (quick)" if quick else "")) as update:
        result = api.run_selftest(
            compare=compare,
            quick=quick,
            hygiene_script=hygiene_script,
            python=python,
            replicas=replicas,
            timeout=timeout,
            progress=update,
        )
    if wants_json(fmt, as_json):
        console.print_json(result)
        for line in selftest.failed(result):  # the JSON holds them as "problems"; a person reads stderr
            console.say(console.err(), line)
    else:
        selftest.show(result, console.out())
    if result["problems"]:
        raise typer.Exit(1)
    from envpin.probe.selftest.run import timed_out

    late = timed_out(result)
    if late:
        from envpin.errors import SelftestTimeout

        raise SelftestTimeout(
            "self-test timed out (inconclusive): " + "; ".join(late),
            hint="raise --timeout (CPU seconds per TensorFlow child) or run on a less loaded machine",
        )
    raise typer.Exit(0)
