"""Views of `envpin fleet probe --slurm` (one row per node, then the breaking fields in which nodes differ) and
`envpin fleet selftest --slurm` (one row per node's worker, then the verdict across them and the fleet's)."""

from __future__ import annotations

from envpin.views.console import print_json, say

TYPE_CHECKING = False  # typing's, without importing typing
if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from envpin.api import FleetProbe, FleetSelftest
    from envpin.fleet.slurm import NodeOutcome

_STYLE = {"ok": "green", "failed": "bold red", "timed_out": "bold red"}


def probed(res: FleetProbe, as_json: bool, console: Console, note: Console) -> None:
    """Where each node's report or error went, then the fleet summary `envpin fleet report` prints (or all of
    it as JSON)."""
    from envpin.views import fleet

    if res.job_id:
        say(note, f"slurm job {res.job_id} in partition {res.partition} released")
    if as_json:
        print_json(res.to_json(), ascii_only=True)
        return
    console.print(_nodes(res.outcomes))
    fleet.summary(res.result, console, command="fleet report")
    say(console, f"reports in {res.out}")


def selftested(res: FleetSelftest, as_json: bool, console: Console, note: Console) -> None:
    """Where each node's report or error went, then the fleet summary `envpin fleet report` prints for the
    same folder: the multi-worker self-test's table (each node's worker) and its verdict among the rest (or
    all of it as JSON)."""
    from envpin.views import fleet

    if res.job_id:
        say(note, f"slurm job {res.job_id} in partition {res.partition} released")
    if as_json:
        print_json(res.to_json(), ascii_only=True)
        return
    console.print(_nodes(res.outcomes))
    fleet.summary(res.result, console, command="fleet report")
    say(console, f"reports and the self-test's result in {res.out}")


def _nodes(outcomes: list[NodeOutcome]) -> Table:
    from rich.table import Table
    from rich.text import Text

    t = Table(header_style="bold")
    for name in ("node", "status", "report or error"):
        t.add_column(name, overflow="fold", no_wrap=name in ("node", "status"))
    for o in outcomes:
        where = str(o.report) if o.status == "ok" or o.error is None else o.error
        # Text cells: node names and error text must not be read as rich markup.
        t.add_row(Text(o.node), Text(o.status.replace("_", " "), style=_STYLE.get(o.status, "")), Text(where))
    return t
