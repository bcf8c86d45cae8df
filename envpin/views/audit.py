"""View of `envpin audit`: findings one per line (tty, gcc, github) or as JSON/SARIF, the fixes made, a summary."""

from __future__ import annotations

from typing import TYPE_CHECKING

from envpin.views.console import print_json, say

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

    from envpin.audit import AuditRun
    from envpin.audit.rules import Finding

_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def tty_line(f: Finding) -> Text:
    """`path:line rule severity: message. Fix: ...`; colour reaches only a terminal (rich drops it elsewhere)."""
    from rich.text import Text

    from envpin.audit import report

    return Text.assemble((f"{f.file}:{f.line}", "bold"), " ", (f.rule, "dim"), " ", (f.severity, _STYLE[f.severity]),
                         ": " + report.tty_line(f).split(": ", 1)[1])


def output_format(fmt: str | None, as_json: bool, sarif: bool) -> str:
    """--format, with --json and --sarif as its aliases; two different choices are a usage error."""
    from envpin.audit.report import FORMATS
    from envpin.errors import UsageError, shown

    chosen = {x for x in (fmt, "json" if as_json else None, "sarif" if sarif else None) if x is not None}
    if len(chosen) > 1:
        raise UsageError(f"{' and '.join(sorted(chosen))} output exclude each other", hint="choose one output format")
    value = chosen.pop() if chosen else "tty"
    if value not in FORMATS:
        raise UsageError(f"unknown output format '{shown(value)}'", hint="use --format " + ", ".join(FORMATS))
    return value


def audited(res: AuditRun, fmt: str, fixing: bool, console: Console, note: Console) -> None:
    """fmt: tty, json, sarif, gcc or github. What --fix did is progress (stderr); findings are results.

    The summary goes to stdout after tty lines, to stderr after machine formats (stdout stays parseable)."""
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
    elif fmt in ("gcc", "github"):
        line = report.gcc_line if fmt == "gcc" else report.github_line
        for f in res.findings:
            say(console, line(f))
    else:
        for f in res.findings:
            console.print(tty_line(f), soft_wrap=True, highlight=False)
        say(console, summary)
        return
    say(note, summary)
