"""View of `envpin fleet probe --slurm`: one row per node, then the breaking fields in which nodes differ."""

from __future__ import annotations

from typing import TYPE_CHECKING

from envpin.views.console import say

if TYPE_CHECKING:
    from rich.console import Console

    from envpin.api import FleetProbe

ABSENT = "(absent)"
_STYLE = {"ok": "green", "failed": "bold red", "timeout": "bold red"}


def short(fingerprint: str | None) -> str:
    """sha256:<first 12 hex digits>: enough to tell classes apart in a table (the files hold the rest)."""
    if not fingerprint:
        return "-"
    algo, _, digest = fingerprint.partition(":")
    return f"{algo}:{digest[:12]}" if digest else fingerprint[:19]


def probed(res: FleetProbe, console: Console, note: Console) -> None:
    from rich.table import Table
    from rich.text import Text

    if res.job_id:
        say(note, f"slurm job {res.job_id} in partition {res.partition} released")
    t = Table(header_style="bold")
    for name in ("node", "status", "device class", "fingerprint", "report or error"):
        t.add_column(name, overflow="fold", no_wrap=name in ("node", "status", "fingerprint"))
    for r in res.rows:
        where = str(r.path) if r.status == "ok" or r.error is None else r.error
        # Text cells: node names and error text must not be read as rich markup.
        t.add_row(Text(r.node), Text(r.status, style=_STYLE.get(r.status, "")), Text(r.device_class or "-"),
                  Text(short(r.fingerprint)), Text(where))
    console.print(t)
    counts = {s: sum(1 for r in res.rows if r.status == s) for s in ("ok", "failed", "timeout")}
    say(console, f"{len(res.rows)} node(s): {counts['ok']} ok, {counts['failed']} failed, "
                 f"{counts['timeout']} timed out")
    if res.divergences:
        nodes = sorted({d.node for d in res.divergences})
        verb = "differs" if len(nodes) == 1 else "differ"
        say(console, f"breaking differences: {', '.join(nodes)} {verb} from {', '.join(res.reference)}")
        d_table = Table(header_style="bold")
        for name in ("node", "field", "value", "reference value", "why it matters"):
            d_table.add_column(name, overflow="fold")
        for d in res.divergences:
            d_table.add_row(Text(d.node), Text(d.key), Text(ABSENT if d.value is None else d.value),
                            Text(ABSENT if d.reference_value is None else d.reference_value), Text(d.reason))
        console.print(d_table)
    elif counts["ok"] > 1:
        say(console, f"the {counts['ok']} probed nodes share one fingerprint")
    say(console, f"reports in {res.out}")
