"""`envpin runs`: the environment differences between two tracked runs, as `envpin diff` shows them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from envpin.views.console import print_json, say
from envpin.views.diff import MAX_TABLE_ROWS, lines, table

if TYPE_CHECKING:
    from rich.console import Console

    from envpin.api.track import RunsDiff


def runs_diff(res: RunsDiff, as_json: bool, console: Console) -> None:
    from envpin.reports import diff

    if as_json:
        print_json(
            diff.to_json(
                res.diffs,
                a={"run": res.a.source, "tracker": res.a.kind, "fingerprint": res.a.report.get("fingerprint")},
                b={"run": res.b.source, "tracker": res.b.kind, "fingerprint": res.b.report.get("fingerprint")},
                weights_hash={"a": res.a.weights_hash, "b": res.b.weights_hash},
                notes=res.notes,
            )
        )
        return
    say(console, diff.verdict(res.diffs))
    for note in res.notes:
        say(console, note)
    a, b = f"A ({res.a.kind})", f"B ({res.b.kind})"
    if len(res.diffs) > MAX_TABLE_ROWS:
        console.file.write(lines(res.diffs, a, b))
        console.file.flush()
    elif res.diffs:
        console.print(table(res.diffs, a, b))
