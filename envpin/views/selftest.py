"""View of a self-test result: the per-op table, the golden hash, seed-hygiene findings, errors."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from envpin.views.console import say

if TYPE_CHECKING:
    from rich.console import Console

_STYLE = {
    "deterministic": "green",
    "NONDETERMINISTIC": "bold red",
    "raises-under-determinism": "yellow",
    "skipped": "dim",
}


def show(result: dict[str, Any], console: Console) -> None:
    """Draws from the self-test's neutral summary (as the Markdown report does), so the two cannot disagree;
    cell text is never read as Rich markup (op names and messages come from TensorFlow)."""
    from rich.table import Table
    from rich.text import Text

    from envpin.probe.selftest.report import NUMERIC, summary

    s = summary(result)
    if "skipped" not in s:
        table = Table(title=Text(s["title"]))
        for col in s["columns"]:
            table.add_column(col, justify="right" if col in NUMERIC else "left")
        verdict = s["columns"].index("verdict")
        for row in s["rows"]:
            cells = [Text(c) for c in row["cells"]]
            cells[verdict] = Text(row["verdict"], style=_STYLE.get(row["verdict"], ""))
            table.add_row(*cells)
        console.print(table)
    for line in s["lines"]:
        say(console, line)
    for line in failed(result):
        say(console, line)


def failed(result: dict[str, Any]) -> list[str]:
    """What made the self-test fail (exit 1), last, so the exit status is never the only sign: a heading with
    the count, then each problem on its own line; nothing when it did not fail."""
    found = result.get("problems") or []
    if not found:
        return []
    return [f"self-test FAILED: {len(found)} problem{'' if len(found) == 1 else 's'}", *(f"  - {p}" for p in found)]
