"""Views of `envpin fleet`: the fleet summary (or its JSON), its HTML page, and the manifest."""

from __future__ import annotations

import sys

from envpin.errors import param, shown
from envpin.views.console import say

TYPE_CHECKING = False  # typing's, without importing typing
if TYPE_CHECKING:
    from typing import Any

    from rich.console import Console
    from rich.table import Table

    from envpin.api import FleetManifest, FleetReport
    from envpin.fleet.aggregate import FleetResult, Node, Spread
    from envpin.fleet.multiworker import MultiWorker

_STYLE = {"breaking": "bold red", "risk": "yellow", "info": "dim"}
#: Node names listed per value/class before "and N more": a summary stays readable for thousands of nodes.
NAMES_SHOWN = 6
VALUES_SHOWN = 4
FIELDS_SHOWN = 40


def _names(names: tuple[str, ...] | list[str], limit: int = NAMES_SHOWN) -> str:
    # Names come from reports: control characters escaped before they reach a terminal.
    head = ", ".join(shown(n, 60) for n in names[:limit])
    return head + (f" and {len(names) - limit} more" if len(names) > limit else "")


def report(res: FleetReport, fmt: str, console: Console, note: Console) -> None:
    """Text: verdict first, then classes, outliers, differing fields, golden hashes, nodes without a report
    (failed, timed out, missing) and nodes that were not expected."""
    if fmt == "json":
        from envpin.fleet.aggregate import to_json_text

        sys.stdout.write(to_json_text(res.result))
        sys.stdout.flush()
    else:
        summary(res.result, console)
    if res.html is not None:
        say(note, f"wrote {res.html}")


def summary(result: FleetResult, console: Console, command: str | None = None) -> None:
    """The text summary. Its notes name the parameters of `envpin fleet report` that show more (`command`:
    "fleet report" when the summary follows another command, whose parameters those are not)."""
    c = result.counts()
    say(console, result.verdict())
    expected = result.expected
    if expected is None:
        say(console, f"nodes: {c['nodes']} ({c['ok']} probed, {c['failed']} failed, {c['timed_out']} timed out)")
    else:
        source = f"listed in {shown(expected.origin, 200)}" if expected.origin else param("expect", command)
        say(
            console,
            f"nodes: {c['nodes']} ({c['ok']} probed, {c['failed']} failed, {c['timed_out']} timed out, "
            f"{c['missing']} missing); expected: {expected.count} ({source})",
        )
    if result.classes:
        console.print(_classes(result))
    if result.outliers:
        say(console, f"outliers: {_names(result.outliers, 20)}")
    if result.spreads:
        console.print(_spreads(result))
        if len(result.spreads) > FIELDS_SHOWN:
            hidden = len(result.spreads) - FIELDS_SHOWN
            say(
                console,
                f"… and {hidden} more fields ({param('fmt', command)} json and {param('html', command)} show all)",
            )
    if result.golden:
        console.print(_golden(result))
    if result.multiworker:
        from envpin.fleet import multiworker

        for m in result.multiworker:
            if isinstance(m, multiworker.MultiWorker):
                console.print(multiworker_table(m))
    failed = [n for n in result.nodes if n.status != "ok"]
    if failed:
        console.print(_failed(failed))
    _unexpected(result, console, command)
    if result.informational:
        keys = list(result.informational)
        more = f" and {len(keys) - 8} more" if len(keys) > 8 else ""
        say(console, f"informational differences (not shown): {', '.join(shown(k, 80) for k in keys[:8])}{more}")


def _table(title: str, *columns: str) -> Table:
    """A summary table: titled on the left, bold headers, every column folding long values."""
    from rich.table import Table

    t = Table(title=title, title_justify="left", header_style="bold")
    for col in columns:
        t.add_column(col, overflow="fold")
    return t


def _classes(result: FleetResult) -> Table:
    """The classes of nodes whose result-affecting fields are identical, the reference marked."""
    from rich.text import Text

    t = _table(
        "classes (identical result-affecting fields)", "class", "nodes", "fingerprint", "device classes", "members"
    )
    for k in result.classes:
        t.add_row(
            Text(f"{k.id}{' (reference)' if k.reference else ''}"),
            Text(str(len(k.nodes))),
            Text(k.fingerprint[:19] + "…"),
            Text("\n".join(shown(d, 200) for d in k.device_classes)),
            Text(_names(k.nodes)),
        )
    return t


def _spreads(result: FleetResult) -> Table:
    """The first FIELDS_SHOWN fields that differ, with their values and the nodes of each."""
    from rich.text import Text

    t = _table("fields that differ", "severity", "field", "values (nodes)", "why it matters")
    for s in result.spreads[:FIELDS_SHOWN]:
        t.add_row(
            Text(s.severity, style=_STYLE.get(s.severity, "")),
            Text(shown(s.key, 200)),
            Text(_values(s)),
            Text(s.reason),
        )
    return t


def _golden(result: FleetResult) -> Table:
    """The golden training hashes per device class, and the nodes that ran no self-test."""
    from rich.text import Text

    t = _table("golden training hashes per device class", "device class", "verdict", "hashes (nodes)")
    for g in result.golden:
        lines = [f"{shown(h, 80)[:19]}… ({len(ns)}: {_names(ns, 3)})" for h, ns in g.hashes.items()]
        if g.unchecked:
            lines.append(f"not checked, no self-test ({len(g.unchecked)}: {_names(g.unchecked, 3)})")
        t.add_row(
            Text(shown(g.device_class, 200)),
            Text("consistent" if g.consistent else "differs", style="" if g.consistent else "bold red"),
            Text("\n".join(lines)),
        )
    return t


def multiworker_table(m: MultiWorker) -> Table:
    """The multi-worker self-test's workers, one row per node: did it run, its weights per run, did it repeat
    (the verdict across them leads the summary)."""
    from rich.text import Text

    from envpin.fleet.multiworker import COMMUNICATION, STRATEGY

    title = f"multi-worker self-test ({STRATEGY}, {COMMUNICATION}, {len(m.workers)} workers, {m.runs} runs"
    title += f", {m.launcher}" + (f" job {m.job}" if m.job else "") + ")"
    t = _table(title, "node", "worker", "status", "weights per run", "repeats")
    for w in m.workers:
        weights = ", ".join(h[:19] + "…" for h in w.hashes) if w.hashes else (w.reason or "")
        repeats = {True: "yes", False: "NO", None: "-"}[w.repeats]
        t.add_row(
            Text(shown(w.node, 60)),
            Text("-" if w.task_index is None else str(w.task_index)),
            Text(w.status.replace("_", " "), style="" if w.status == "ok" else "bold red"),
            Text(shown(weights, 400)),
            Text(repeats, style="bold red" if w.repeats is False else ""),
        )
    return t


def _failed(failed: list[Node]) -> Table:
    """The nodes without a report: failed, timed out or missing, and why."""
    from rich.text import Text

    t = _table("nodes without a report", "node", "status", "reason")
    for n in failed:
        t.add_row(
            Text(shown(n.name, 80)),
            Text(n.status.replace("_", " "), style="bold red"),
            Text(shown(n.reason or "", 300)),
        )
    return t


def _unexpected(result: FleetResult, console: Console, command: str | None) -> None:
    """Where the nodes found and the nodes expected disagree: expected ones that left nothing, and reports of
    nodes not expected (named, or counted)."""
    expected = result.expected
    if result.unnamed_missing and expected is not None:
        say(
            console,
            f"missing: {result.unnamed_missing} of the {expected.count} expected nodes left no report and "
            f"no error file ({result.found()} found; {param('expect_nodes', command)} FILE would name them)",
        )
    if result.unexpected:
        listed = shown(expected.origin, 200) if expected is not None and expected.origin else "the expected nodes"
        say(
            console,
            f"not expected: {_names(result.unexpected, 20)} (not in {listed}: a stale report, another "
            "fleet's, or a node missing from the list)",
        )
    if result.surplus and expected is not None:
        say(
            console,
            f"not expected: {result.surplus} node(s) more than the {expected.count} expected "
            f"({result.found()} found: a stale or duplicate report, or a wrong {param('expect', command)})",
        )


def _groups(s: Spread) -> list[tuple[str, tuple[str, ...], bool]]:
    """The field's values with their nodes, the most common first, each marked when it is the common one."""
    groups: list[tuple[str, tuple[str, ...]]] = [(v, n) for v, n in s.values.items()]
    if s.absent:
        groups.append(("(not checked)" if s.golden else "(absent)", s.absent))
    groups.sort(key=lambda g: (-len(g[1]), g[0]))
    return [(v, n, v == s.common or (s.common is None and v == "(absent)")) for v, n in groups]


def _html_values(s: Spread, shown_values: int = 20, names: int = 50) -> list[tuple[str, int, str | None]]:
    """The page's values of a field: (value, nodes holding it, the nodes named or None for the common one)."""
    groups = _groups(s)
    out: list[tuple[str, int, str | None]] = [
        (
            v,
            len(ns),
            None if common else ", ".join(ns[:names]) + (f" and {len(ns) - names} more" if len(ns) > names else ""),
        )
        for v, ns, common in groups[:shown_values]
    ]
    if len(groups) > shown_values:
        rest = groups[shown_values:]
        out.append((f"… {len(rest)} more values", sum(len(ns) for _, ns, _ in rest), None))
    return out


def _values(s: Spread) -> str:
    """The most common value first; minority values name their nodes."""
    groups = _groups(s)
    lines = []
    for value, nodes, is_common in groups[:VALUES_SHOWN]:
        who = "" if is_common else f": {_names(nodes, 3)}"
        lines.append(f"{shown(value, 60)} ({len(nodes)}{who})")
    if len(groups) > VALUES_SHOWN:
        lines.append(f"… {len(groups) - VALUES_SHOWN} more values")
    return "\n".join(lines)


def manifest(res: FleetManifest, console: Console, note: Console) -> None:
    """The manifest on stdout (so `> file` and `| kubectl apply -f -` work), or the file written; warnings
    on stderr."""
    for w in res.warnings:
        say(note, f"warning: {w}")
    if res.written is not None:
        say(console, f"wrote {res.written}")
    else:
        sys.stdout.write(res.text)
        sys.stdout.flush()


# --- the HTML page -----------------------------------------------------------------------------------------

CELL_LIMIT = 40
#: Fields shown as matrix columns (most severe first); the table of differing fields above it lists them all.
MATRIX_COLUMNS = 150


def _cell(text: str) -> str:
    return text if len(text) <= CELL_LIMIT else text[: CELL_LIMIT - 1] + "…"


def html_context(result: FleetResult) -> dict[str, Any]:
    """What the HTML template shows, computed here so the template only lays it out."""
    from envpin.fleet.aggregate import OK

    columns = list(result.spreads[:MATRIX_COLUMNS])
    value_maps = [{n: v for v, ns in s.values.items() for n in ns} for s in columns]
    absent_sets = [set(s.absent) for s in columns]
    outliers = set(result.outliers)
    rows = []
    order = {c.id: i for i, c in enumerate(result.classes)}
    probed = sorted((n for n in result.nodes if n.status == OK), key=lambda n: (order[n.class_id or 0], n.name))
    for n in probed:
        cells = []
        for s, values, absent in zip(columns, value_maps, absent_sets, strict=True):
            value = values.get(n.name)
            if s.golden:
                if value is None:
                    text, full = ("not checked" if n.name in absent else ""), ""
                    mark = ""
                else:
                    text, full, mark = _cell(value), value, (s.severity if value != s.common else "")
            else:
                text = "(absent)" if value is None else _cell(value)
                full = "" if value is None else value
                mark = s.severity if value != s.common else ""
            cells.append({"text": text, "full": full if full != text else "", "mark": mark})
        rows.append({"name": n.name, "class_id": n.class_id, "outlier": n.name in outliers, "cells": cells})
    failed = [n for n in result.nodes if n.status != OK]
    return {
        "verdict": result.verdict(),
        "counts": result.counts(),
        "expected": result.expected,
        "found": result.found(),
        "unnamed_missing": result.unnamed_missing,
        "unexpected": result.unexpected,
        "surplus": result.surplus,
        "classes": result.classes,
        "outliers": result.outliers,
        "golden": result.golden,
        "columns": columns,
        "fields": result.spreads,
        # each field's values, whole, with how many nodes hold each; a minority value names its nodes (50 at
        # most); the 20 most common values of a field, then how many more (the page stays readable at 100k nodes)
        "values": {sp.key: _html_values(sp) for sp in result.spreads},
        "hidden_columns": len(result.spreads) - len(columns),
        "rows": rows,
        "failed": failed,
        "informational": result.informational,
        "exit_code": result.exit_code,
        # The parameters that say which fleet to expect, as the caller names them (the CLI: its options).
        "expect_option": param("expect"),
        "expect_nodes_option": param("expect_nodes"),
    }


def to_html(result: FleetResult) -> str:
    """One self-contained page (inline CSS, no script, no external asset); every text is HTML-escaped."""
    from envpin.environment.render import template_env

    template = template_env("envpin.views", autoescape=True).get_template("fleet-report.html.j2")
    return template.render(**html_context(result))


def html_page(result: FleetResult) -> bytes:
    """The page as UTF-8, for the caller to write (`envpin fleet report --html`, atomically); lone surrogates
    from undecodable bytes in a report are written as escapes."""
    return to_html(result).encode("utf-8", "backslashreplace")
