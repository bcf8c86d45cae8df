"""`envpin runs`: compare the environments of two tracked runs (envpin.track / envpin.keras.EnvpinCallback)."""

from __future__ import annotations

from typing import Annotated

import typer

from envpin.cli.options import Format, FormatOpt, JsonOpt, command_app, wants_json

runs_app = command_app()


@runs_app.command("runs")
def runs_cmd(
    a: Annotated[
        str, typer.Argument(help="First run: an MLflow run id, a TensorBoard log folder or a W&B run folder.")
    ],
    b: Annotated[str, typer.Argument(help="Second run, the same kinds.")],
    tracking_uri: Annotated[
        str | None,
        typer.Option("--tracking-uri", metavar="URI", help="MLflow tracking server (default MLFLOW_TRACKING_URI)."),
    ] = None,
    as_json: JsonOpt = False,
    fmt: FormatOpt = Format.text,
) -> None:
    """Classify every environment difference between two tracked runs, as diff does. Exit 0: none breaking;
    1: some breaking; 2: bad input."""
    from envpin import api
    from envpin.views import console, track

    res = api.diff_runs(a, b, tracking_uri)
    track.runs_diff(res, wants_json(fmt, as_json), console.out())
    raise typer.Exit(res.exit_code)
