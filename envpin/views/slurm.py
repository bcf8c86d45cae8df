"""View of `envpin fleet probe --slurm`: one row per node, then the breaking fields in which nodes differ."""

from __future__ import annotations

from envpin.views.console import say

TYPE_CHECKING = False  # typing's, without importing typing
if TYPE_CHECKING:
    from rich.console import Console

    from envpin.api import FleetProbe

_STYLE = {"ok": "green", "failed": "bold red", "timed_out": "bold red"}


def probed(res: FleetProbe, console: Console, note: Console) -> None:
    """Where each node's report or error went, then the fleet summary `envpin fleet report` prints."""
    from rich.table import Table
    from rich.text import Text

    from envpin.views import fleet

    if res.job_id:
        say(note, f"slurm job {res.job_id} in partition {res.partition} released")
    t = Table(header_style="bold")
    for name in ("node", "status", "report or error"):
        t.add_column(name, overflow="fold", no_wrap=name in ("node", "status"))
    for o in res.outcomes:
        where = str(o.report) if o.status == "ok" or o.error is None else o.error
        # Text cells: node names and error text must not be read as rich markup.
        t.add_row(Text(o.node), Text(o.status.replace("_", " "), style=_STYLE.get(o.status, "")), Text(where))
    console.print(t)
    fleet.summary(res.result, console, command="fleet report")
    say(console, f"reports in {res.out}")
