"""View of `envpin probe`: the fingerprint and the files written."""

from __future__ import annotations

from typing import TYPE_CHECKING

from envpin.views.console import say

if TYPE_CHECKING:
    from rich.console import Console

    from envpin.api import ProbeResult


def probed(res: ProbeResult, console: Console, note: Console) -> None:
    """When the report itself went to stdout, the summary goes to stderr so stdout stays one JSON document."""
    where = note if res.report_on_stdout else console
    say(where, f"fingerprint {res.fingerprint} ({res.fingerprinted} fingerprinted fields, {res.errors} with errors)")
    for path in res.written:
        say(where, f"wrote {path}")
