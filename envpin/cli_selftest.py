"""CLI adapter for ``envpin selftest``: run the determinism self-test on this machine and report it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from envpin.console import err, print_json
from envpin.errors import EnvpinError, UsageError

_STYLE = {
    "deterministic": "green",
    "NONDETERMINISTIC": "bold red",
    "raises-under-determinism": "yellow",
    "skipped": "dim",
}


class SelftestError(EnvpinError):
    """The self-test could not run here (no usable TensorFlow)."""


def _show(result: dict[str, Any]) -> None:
    """Human summary on stderr: the per-op table, the golden hash, hygiene findings."""
    off = {c["name"]: c["verdict"] for c in result.get("without_determinism", [])}
    table = Table(title=f"TensorFlow {result.get('tf_version')}: {result['determinism'].get('method', '')}")
    for col in ("check", "op", "verdict", "differing", "max abs diff", "s"):
        table.add_column(col, justify="right" if col in ("differing", "max abs diff", "s") else "left")
    if off:
        table.add_column("without determinism")
    for c in result.get("checks", []):
        diff = "-" if c["max_abs_diff"] is None else f"{c['max_abs_diff']:.3g}"
        row = [escape(c["name"]), escape(c["op"]), f"[{_STYLE[c['verdict']]}]{c['verdict']}[/]",
               "-" if c["differing_elements"] is None else str(c["differing_elements"]), diff, f"{c['seconds']:.2f}"]
        if off:
            row.append(off.get(c["name"], "-"))
        table.add_row(*row)
    err.print(table)
    for c in result.get("checks", []):
        if c["verdict"] in ("NONDETERMINISTIC", "raises-under-determinism", "skipped"):
            err.print(f"{c['name']}: {c['message']}", markup=False, soft_wrap=True)
    err.print(f"summary: {result.get('summary', '')}", markup=False, soft_wrap=True)
    if result.get("summary_without_determinism"):
        err.print(f"without determinism: {result['summary_without_determinism']}", markup=False, soft_wrap=True)
    gold = result.get("golden") or {}
    if "hash" in gold:
        state = "equal in two fresh runs" if gold["runs_equal"] else "DIFFERENT in two fresh runs"
        err.print(f"golden hash {gold['hash']} ({state}, {gold['steps']} steps) on {gold['device_class']}",
                  markup=False, soft_wrap=True)
    else:
        err.print(f"golden hash not available: {gold.get('skipped') or gold.get('error')}", markup=False,
                  soft_wrap=True)
    for h in result.get("hygiene", []):
        line = f"hygiene {h['check']}: {h['status']}: {h['message']}"
        if h["status"] == "finding":
            line += f" Fix: {h['fix']}"
        err.print(line, markup=False, soft_wrap=True)
    for e in result.get("errors", []):
        err.print(f"error: {e}", markup=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add ``selftest`` to the envpin application."""

    @app.command("selftest")
    def selftest_cmd(
        compare: Annotated[
            bool, typer.Option("--compare", help="Also run the op battery with determinism off.")
        ] = False,
        quick: Annotated[
            bool, typer.Option("--quick", help="One trial per op; hygiene checks only the hash seed.")
        ] = False,
        as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout.")] = False,
        script: Annotated[
            Path | None,
            typer.Option("--hygiene-script", help="Check this training script's seeding (runs it twice)."),
        ] = None,
        python: Annotated[
            str | None,
            typer.Option("--python", help="Interpreter with TensorFlow that runs the tests (default: this one)."),
        ] = None,
    ) -> None:
        """Check, per op, that this TensorFlow is bitwise deterministic; hash a golden training run.

        Exit 0: deterministic; 1: an op differed between runs, the golden runs differed, or a seed-hygiene
        finding; 2: TensorFlow cannot be imported."""
        from envpin.probe.selftest import problems, run_selftest

        if script is not None and not script.is_file():
            raise UsageError(f"hygiene script {script} does not exist", hint="pass the path of a Python script")
        if python is not None and shutil.which(python) is None:
            raise UsageError(f"interpreter {python} not found", hint="pass the path of a python executable")
        result = run_selftest(compare=compare, quick=quick, hygiene_script=str(script) if script else None,
                              python=shutil.which(python) if python else None)
        if as_json:
            print_json(result)
        if "skipped" in result:
            raise SelftestError(
                f"self-test skipped: {result['skipped']}",
                hint="install TensorFlow here, or run it inside the image: python3 -m envpin.probe.selftest",
            )
        if not as_json:
            _show(result)
        found = problems(result)
        if found:
            err.print(f"self-test found {len(found)} problem(s)", markup=False, soft_wrap=True)
            raise typer.Exit(1)
