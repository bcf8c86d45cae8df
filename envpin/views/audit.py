"""View of `envpin audit`: a table of findings (or JSON/SARIF), the fixes made, and a summary line."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from envpin.views.console import print_json, say

if TYPE_CHECKING:
    from rich.console import Console

    from envpin.audit import AuditRun
    from envpin.audit.rules import Finding

_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def table(findings: list[Finding]) -> Any:
    from rich.markup import escape
    from rich.table import Table

    t = Table(show_lines=True)
    t.add_column("location", no_wrap=True)
    t.add_column("severity")
    t.add_column("rule", no_wrap=True)
    t.add_column("finding and fix", overflow="fold")
    for f in findings:
        t.add_row(escape(f"{f.file}:{f.line}"), f"[{_STYLE[f.severity]}]{f.severity}[/]", f.rule,
                  f"{escape(f.message)}\n[dim]fix:[/] {escape(f.fix)}")
    return t


def audited(res: AuditRun, fmt: str, fixing: bool, console: Console, note: Console) -> None:
    """fmt: 'table', 'json' or 'sarif'. What --fix did is progress (stderr); findings are results."""
    from envpin.audit import report

    for done in res.fixed:
        o = done.outcome
        say(note, f"{done.source}: fixed {len(o.fixed)} finding(s), commented {len(o.commented)}; wrote {done.output}")
        for action in o.actions:
            say(note, f"  {action}")
    summary = ("left in the fixed files: " if fixing else "") + report.summary_line(res.findings, len(res.files))
    if fmt == "sarif":
        print_json(report.to_sarif(res.findings))
    elif fmt == "json":
        fixed = [
            {"source": d.source, "output": d.output, "fixed": [f.to_json() for f in d.outcome.fixed],
             "commented": [f.to_json() for f in d.outcome.commented], "actions": d.outcome.actions}
            for d in res.fixed
        ] if fixing else None
        print_json(report.to_json(res.findings, res.files, res.fail_on, res.exit_code, fixed))
    else:
        if res.findings:
            console.print(table(res.findings))
        say(console, summary)
        return
    say(note, summary)
