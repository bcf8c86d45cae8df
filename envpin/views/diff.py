"""Views of differences: `envpin diff` and `envpin verify` (verdict line first, then the table)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from envpin.errors import param
from envpin.views.console import print_json, say

if TYPE_CHECKING:
    from rich.console import Console

    from envpin.api import DiffResult, VerifyResult
    from envpin.reports.diff import Difference

ABSENT = "(absent)"
#: Longest value shown in a table cell or line (the JSON output has every value whole).
MAX_CELL = 200
#: Above this many differences the table becomes one line per difference: the same content, at the speed of
#: the JSON output (rich lays a table out cell by cell).
MAX_TABLE_ROWS = 200


def cell(value: str | None) -> str:
    """A value as shown: (absent), or shortened past MAX_CELL characters with its length said."""
    if value is None:
        return ABSENT
    if len(value) <= MAX_CELL:
        return value
    return f"{value[:MAX_CELL]}… ({len(value):,} characters; {param('as_json')} shows the whole value)"


def lines(diffs: list[Difference], a_label: str, b_label: str) -> str:
    """One line per difference, breaking first: `severity key: A -> B (why)`."""
    return "".join(
        f"{d.severity} {d.key}: {a_label} {cell(d.a)} -> {b_label} {cell(d.b)} ({d.reason})\n" for d in diffs
    )


def table(diffs: list[Difference], a_label: str, b_label: str, width: int = 48) -> Any:
    """A rich table of differences, breaking first (the order diff.sort gives)."""
    from rich.table import Table
    from rich.text import Text

    from envpin.probe import fields

    style = {fields.BREAKING: "bold red", fields.RISK: "yellow", fields.INFO: "dim"}
    t = Table(show_lines=False, header_style="bold")
    t.add_column("severity", no_wrap=True)
    t.add_column("field", overflow="fold")
    t.add_column(a_label, overflow="fold", max_width=width)
    t.add_column(b_label, overflow="fold", max_width=width)
    t.add_column("why it matters", overflow="fold")
    for d in diffs:
        # Text cells: values such as '["a","b"]' must not be read as rich markup.
        t.add_row(
            Text(d.severity, style=style.get(d.severity, "")),
            Text(d.key),
            Text(cell(d.a)),
            Text(cell(d.b)),
            Text(d.reason),
        )
    return t


def _show(
    diffs: list[Difference],
    notes: list[str],
    a_label: str,
    b_label: str,
    console: Console,
    scope: tuple[list[str], list[str]] = ([], []),
) -> None:
    """The verdict, qualified by what was compared and what was not (`scope`, verify only), then the table."""
    from envpin.reports import diff

    checked, unchecked = scope
    verdict = diff.verdict(diffs)
    if unchecked:
        verdict += f" in what was compared ({len(unchecked)} thing{'s' if len(unchecked) != 1 else ''} not compared)"
    say(console, verdict)
    for line in checked:
        say(console, f"compared: {line}")
    for line in unchecked:
        say(console, f"not compared: {line}")
    for n in notes:
        say(console, n)
    if len(diffs) > MAX_TABLE_ROWS:
        console.file.write(lines(diffs, a_label, b_label))
        console.file.flush()
    elif diffs:
        console.print(table(diffs, a_label, b_label))


def differences(res: DiffResult, as_json: bool, console: Console) -> None:
    from envpin.reports import diff

    if as_json:
        print_json(
            diff.to_json(
                res.diffs,
                a=str(res.a),
                b=str(res.b),
                fingerprint={"a": res.fingerprint_a, "b": res.fingerprint_b},
                notes=res.notes,
            )
        )
    else:
        _show(res.diffs, res.notes, res.a.name, res.b.name, console)


def verification(res: VerifyResult, as_json: bool, console: Console, note: Console) -> None:
    """What was compared with what first (stderr), then what was recorded, then the verdict and table."""
    from envpin.reports import diff

    if res.compared:
        say(note, res.compared)
    for line in res.warnings:
        say(note, f"warning: {line}")
    for line in res.recorded:
        say(note, f"recorded: {line}")
    if as_json:
        print_json(
            diff.to_json(
                res.diffs,
                lock=str(res.lock),
                report=res.source,
                notes=res.notes,
                recorded=res.recorded,
                compared=res.compared,
                fingerprint={"expected": res.expected_fingerprint, "actual": res.actual_fingerprint},
                checked=res.checked,
                not_checked=res.unchecked,
            )
        )
    else:
        _show(res.diffs, res.notes, "expected (lock)", "actual", console, (res.checked, res.unchecked))
