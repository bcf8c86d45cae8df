"""The audit engine: runs every rule family's checks over one parsed Dockerfile and merges their findings.

Rules read the parsed Dockerfile (instructions, stages, scopes) and the shell view of each RUN; none of them
looks at raw text. Determinism rules judge the image the build produces (the last stage, or --target) including
the ENV it inherits from stages it builds on; supply-chain rules (pins, hashes, downloads) apply to every stage,
because a builder stage's output ends up in the image too.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from envpin.audit.base import identify
from envpin.audit.check import Check, Context, Finding, RunRule
from envpin.audit.context import BuildContext
from envpin.audit.parser import Dockerfile
from envpin.audit.rule import SEVERITIES
from envpin.audit.rules import DOCKERFILE_FAMILIES
from envpin.audit.rules.syntax import parse_errors
from envpin.audit.shell import Command

#: The checks that read RUN commands, fed by one walk (check_runs), in the families' order.
RUN_RULES: tuple[type[RunRule], ...] = tuple(cls for family in DOCKERFILE_FAMILIES for cls in family.RUN_RULES)


def audit(
    df: Dockerfile, *, target: str | None = None, tf: str | None = None, context: Path | None = None
) -> list[Finding]:
    """All findings for one parsed Dockerfile, sorted by line and rule (lines it could not parse included)."""
    problems = parse_errors(df)
    if not df.stages:
        return merge(problems)  # no FROM survived: nothing else to judge
    stage = df.stage(target)
    ctx = Context(
        df,
        stage,
        identify(df, stage, tf),
        findings=problems,
        build=BuildContext(context) if context is not None else None,
    )
    for check in CHECKS:
        check(ctx)
    return merge(ctx.findings)


class _Parts:
    """A message (or fix) that findings are merged into: its parts joined by '; ', each part once. Which parts it
    has is kept as a set (the parts of "a; b" are a and b), so merging n findings takes time linear in n."""

    __slots__ = ("parts", "seen")

    def __init__(self, text: str) -> None:
        self.parts = [text]
        self.seen = set(text.split("; "))

    def add(self, text: str) -> None:
        if text not in self.seen:
            self.parts.append(text)
            self.seen.update(text.split("; "))

    def text(self) -> str:
        return "; ".join(self.parts)


def merge(findings: list[Finding]) -> list[Finding]:
    """One finding per rule and instruction: two unpinned pip calls in one RUN are one hazard to fix there."""
    merged: dict[tuple[str, int, str], Finding] = {}
    joined: dict[tuple[str, int, str], tuple[_Parts, _Parts]] = {}
    for f in findings:
        key = (f.file, f.line, f.rule)
        m = merged.get(key)
        if m is None:
            merged[key] = f
            continue
        if key not in joined:
            joined[key] = (_Parts(m.message), _Parts(m.fix))
        message, fix = joined[key]
        message.add(f.message)
        fix.add(f.fix)
        if SEVERITIES.index(f.severity) < SEVERITIES.index(m.severity):
            merged[key] = m.replace(severity=f.severity)
    for key, (message, fix) in joined.items():
        merged[key] = merged[key].replace(message=message.text(), fix=fix.text())
    return sorted(merged.values(), key=lambda f: (f.file, f.line, f.rule))


#: Hands one walk's step to the rules that want it: a pipeline, a command.
_Step = Callable[[list[Command]], None]
_Command = Callable[[Command], None]


def _dispatch(rules: list[RunRule]) -> tuple[_Step, _Command, _Command]:
    """What the walk calls for each pipeline and each command: the pipeline() of the rules that override it, and
    command() of those readers that want a command of its name (asked once per name, for commands without and
    with assignments); the third calls every reader, for a RUN where one wants every command."""
    readers = _overriding(rules, "command")
    on_pipeline = [r.pipeline for r in _overriding(rules, "pipeline")]
    plain: dict[str, list[_Command]] = {}
    assigning: dict[str, list[_Command]] = {}

    def pipelines(pipe: list[Command]) -> None:
        for f in on_pipeline:
            f(pipe)

    def command(cmd: Command) -> None:
        by_name = assigning if cmd.assigns else plain
        found = by_name.get(cmd.name)
        if found is None:
            found = by_name[cmd.name] = [r.command for r in readers if r.wants(cmd.name, bool(cmd.assigns))]
        for f in found:
            f(cmd)

    def every_command(cmd: Command) -> None:
        for r in readers:
            r.command(cmd)

    return (on_pipeline[0] if len(on_pipeline) == 1 else pipelines), command, every_command


def _overriding(rules: list[RunRule], name: str) -> list[RunRule]:
    """The rules whose class overrides RunRule's hook `name` (the others are never called for it)."""
    return [r for r in rules if getattr(type(r), name) is not getattr(RunRule, name)]


def check_runs(ctx: Context) -> None:
    """Walk every stage's instructions once, each RUN's pipelines and commands once (nested scripts included),
    and hand each step to every rule of RUN_RULES: a RUN is split once and its commands built once for all of
    them, and nothing of it is kept after its last rule has seen it."""
    rules = [cls(ctx) for cls in RUN_RULES]
    on_run = [r.run for r in _overriding(rules, "run")]
    on_run_end = [r.run_end for r in _overriding(rules, "run_end")]
    readers = _overriding(rules, "command")
    pipeline, command, every_command = _dispatch(rules)
    for st in ctx.df.stages:
        for r in rules:
            r.st = st
            r.stage(st)
        for ins in st.instructions:
            if ins.keyword != "RUN":
                continue
            run = ctx.run(ins)
            for r in rules:
                r.ins, r.run_script = ins, run
            for starts in on_run:
                starts(ins, run)
            # run() may ask for every command of this RUN (RunRule.every_command)
            run.script.visit(pipeline, every_command if any(r.every_command for r in readers) else command)
            for ends in on_run_end:
                ends()
        for r in rules:
            r.stage_end()
    for r in rules:
        r.finish()


#: Every check, the families' own in their order, then the one walk over the RUN commands. The order does not
#: change the output: each rule is reported by one check, and findings are merged per rule and sorted.
CHECKS: tuple[Check, ...] = (*(check for family in DOCKERFILE_FAMILIES for check in family.CHECKS), check_runs)
