"""CLI adapter for ``envpin doctor``: can this host run the image? Verdict first, then the reasons."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from envpin.console import err, print_json

if TYPE_CHECKING:
    from envpin.doctor import Diagnosis

_LABEL = {"ok": "ok", "forward-compat": "fwd-compat", "problem": "PROBLEM", "unknown": "unknown"}


def _show(d: Diagnosis) -> None:
    """Human report on stderr: the verdict line, each reason with its fix, then every check."""

    def say(text: str) -> None:
        err.print(text, markup=False, highlight=False, soft_wrap=True)

    say(f"{d.verdict}: {d.target.image} on this host")
    if d.readings.origin != "host":
        say(f"  (host readings replaced from {d.readings.origin})")
    for c in d.reasons:
        say(f"  - {c.message}")
        if c.fix:
            say(f"    {'how to find out' if c.status == 'unknown' else 'fix'}: {c.fix}")
    say("checks:")
    width = max(len(c.name) for c in d.checks)
    for c in d.checks:
        say(f"  {_LABEL[c.status]:<11} {c.name:<{width}}  {c.message}")


def register(app: typer.Typer) -> None:
    """Add ``doctor`` to the envpin application."""

    @app.command("doctor")
    def doctor_cmd(
        ngc: Annotated[
            str | None, typer.Option("--ngc", help="NGC release or tag to check: 22.06 or 22.06-tf2-py3.")
        ] = None,
        lock: Annotated[
            Path | None, typer.Option("--lock", help="Check the image of this envpin.lock (or folder holding one).")
        ] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print the diagnosis as JSON on stdout.")] = False,
    ) -> None:
        """Before pulling: can this host run the image? Docker, NVIDIA runtime/CDI, driver, GPUs.

        Exit 0: will run (possibly through forward compatibility); 1: will not run, or cannot tell; 2: bad input.
        Without --ngc/--lock, the envpin.lock of the current directory is used.
        """
        from envpin import doctor

        diagnosis = doctor.run(ngc=ngc, lock=lock)
        if as_json:
            print_json(diagnosis.to_json())
        else:
            _show(diagnosis)
        raise typer.Exit(diagnosis.exit_code)
