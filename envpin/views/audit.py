"""View of `envpin audit`: findings one per line (tty, gcc, github) or as JSON/SARIF, the fixes made, a summary."""

from __future__ import annotations

import re
from collections.abc import Iterable

TYPE_CHECKING = False  # typing's, without importing typing
if TYPE_CHECKING:
    from rich.console import Console

    from envpin.audit import AuditRun
    from envpin.audit.check import Finding
    from envpin.views.console import Plain

#: SGR codes of the tty format's parts: the place bold, the rule dim, the severity by its weight.
_SGR = {"place": "1", "rule": "2", "error": "1;31", "warning": "33", "info": "36"}
#: Control characters (C0 but tab and newline, DEL, C1): shown as \xNN, so a Dockerfile cannot write terminal
#: escapes into the output (a message quotes the file's text).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _visible(text: str) -> str:
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def tty_line(f: Finding, colour: bool = False) -> str:
    """`path:line rule severity: message. Fix: ...` with control characters made visible; with colour, the
    place, rule and severity carry SGR codes (only for a terminal that takes colour)."""
    from envpin.audit import report

    line = _visible(report.tty_line(f))
    if not colour:
        return line
    place, rule, severity = _visible(f"{f.file}:{f.line}"), _visible(f.rule), f.severity
    message = line[len(place) + len(rule) + len(severity) + 4 :]  # after "PLACE RULE SEVERITY: "
    return (
        f"\x1b[{_SGR['place']}m{place}\x1b[0m \x1b[{_SGR['rule']}m{rule}\x1b[0m "
        f"\x1b[{_SGR[severity]}m{severity}\x1b[0m: {message}"
    )


def _say(console: Console | Plain, text: str) -> None:
    """envpin.views.console.say on rich's console or its Plain stand-in (neither stream a terminal)."""
    console.print(text, markup=False, highlight=False, soft_wrap=True)


def _takes_colour(console: Console | Plain) -> bool:
    """rich's judgement: a terminal (or FORCE_COLOR), with colour not turned off (NO_COLOR, TERM=dumb)."""
    return console.is_terminal and console.color_system is not None and not console.no_color


def _write_lines(console: Console | Plain, lines: Iterable[str]) -> None:
    """Many lines in one write: printing each through rich costs ~0.1 ms a line (3 s for 22,000 findings)."""
    out = console.file
    out.write("".join(line + "\n" for line in lines))
    out.flush()


def _write_chunks(chunks: Iterable[str]) -> None:
    """Canonical JSON (print_json's text) as envpin.audit.report makes it, in blocks: a 200,000-finding
    document is never built whole, nor encoded by json's pure-Python indenting encoder."""
    import sys

    out, block = sys.stdout, []
    for chunk in chunks:
        block.append(chunk)
        if len(block) >= 4096:
            out.write("".join(block))
            block.clear()
    out.write("".join(block))
    out.flush()


def audited(res: AuditRun, fixing: bool, console: Console | Plain, note: Console | Plain) -> None:
    """In the format the run was asked for (res.output: tty, json, sarif, gcc or github). What --fix did is
    progress (stderr); findings are results.

    The summary goes to stdout after tty lines, to stderr after machine formats (stdout stays parseable)."""
    from envpin.audit import report

    for done in res.fixed:
        o = done.outcome
        _say(note, f"{done.source}: fixed {len(o.fixed)} finding(s), commented {len(o.commented)}; wrote {done.output}")
        for action in o.actions:
            _say(note, f"  {action}")
    fmt = res.output
    summary = ("left in the fixed files: " if fixing else "") + report.summary_line(res.findings, len(res.files))
    if fmt == "sarif":
        _write_chunks(report.sarif_chunks(res.findings))
    elif fmt == "json":
        fixed = (
            [
                {
                    "source": d.source,
                    "output": d.output,
                    "fixed": [f.to_json() for f in d.outcome.fixed],
                    "commented": [f.to_json() for f in d.outcome.commented],
                    "actions": d.outcome.actions,
                }
                for d in res.fixed
            ]
            if fixing
            else None
        )
        _write_chunks(report.json_chunks(res.findings, res.files, res.fail_on, res.exit_code, fixed))
    elif fmt in ("gcc", "github"):
        line = report.gcc_line if fmt == "gcc" else report.github_line
        _write_lines(console, (_visible(line(f)) for f in res.findings))
    else:
        colour = _takes_colour(console)
        _write_lines(console, (tty_line(f, colour) for f in res.findings))
        _explained(res, console)
        _say(console, summary)
        return
    _explained(res, note)  # machine formats keep stdout parseable
    _say(note, summary)


def _explained(res: AuditRun, out: Console | Plain) -> None:
    """With --explain: why each script was judged to train, or not."""
    for path, why in res.explained.items():
        _say(out, f"{path}: {why}")
