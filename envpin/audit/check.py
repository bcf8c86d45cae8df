"""What a check is given and what it gives: the Context it reads (the parsed Dockerfile, the produced stage, its
base), the Findings it adds, and RunRule, the base of checks that read RUN commands.

The rule families (envpin/audit/rules/) import this module; it imports none of them, and envpin.audit.engine,
which runs the families' checks, sits above both, so rules, checks and the engine form no import cycle.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from envpin.audit.base import BaseInfo
from envpin.audit.context import BuildContext
from envpin.audit.parser import Dockerfile, Instruction, Stage
from envpin.audit.rule import Rule
from envpin.audit.shell import Command, RunScript, run_script
from envpin.audit.words import Var
from envpin.record import Value

#: A commit as the rules accept it for a pin: 7 to 40 lower-case hex digits.
COMMIT = re.compile(r"^[0-9a-f]{7,40}$")


@dataclass(frozen=True, slots=True)
class Finding(Value):
    """One hazard at file:line, with its rule, severity and fix."""

    rule: str
    severity: str
    file: str
    line: int
    message: str
    fix: str

    def to_json(self) -> dict[str, object]:
        return {
            "file": self.file,
            "line": self.line,
            "rule": self.rule,
            "severity": self.severity,
            "message": self.message,
            "fix": self.fix,
        }


def finding(rule: Rule, file: str, line: int, message: str, fix: str, severity: str | None = None) -> Finding:
    """A finding of `rule`, with the rule's severity unless the check lowers it."""
    return Finding(rule.id, severity or rule.severity, file, line, message, fix)


@dataclass(slots=True)
class Context(Value):
    """What every check of one Dockerfile reads (the parse, target stage, base) and the findings it adds."""

    df: Dockerfile
    target: Stage
    base: BaseInfo
    findings: list[Finding] = field(default_factory=list)
    #: The build context directory, when the audit reads it (requirement files COPY'd from it).
    build: BuildContext | None = None

    def add(self, rule: Rule, line: int, message: str, fix: str, severity: str | None = None) -> None:
        """A finding on a line of the Dockerfile."""
        self.findings.append(finding(rule, self.df.path, line, message, fix, severity))

    def add_at(self, rule: Rule, file: str, line: int, message: str, fix: str) -> None:
        """A finding in another file of the build context (a requirements file's own line)."""
        self.findings.append(finding(rule, file, line, message, fix))

    def chain(self) -> list[Stage]:
        return self.df.chain(self.target)

    def env(self) -> Mapping[str, Var]:
        """The produced image's ENV (a stage's Scope: what it sets and inherits)."""
        return self.target.env

    def env_settings(self, name: str) -> Iterator[tuple[Instruction, str | None]]:
        """Every ENV in the produced image's stages that sets `name`: (instruction, value)."""
        for st in self.chain():
            for ins in st.instructions:
                if ins.keyword == "ENV":
                    for p in ins.pairs:
                        if p.key == name:
                            yield ins, p.value

    def run(self, ins: Instruction) -> RunScript:
        return run_script(ins, self.df.stages[ins.stage or 0].posix_shell)


#: A check that reads the whole Dockerfile at once (FROM lines, the produced image's ENV, ADD instructions).
Check = Callable[[Context], None]


class RunRule:
    """A check that reads the commands of RUN instructions. The engine's check_runs() walks the stages once and
    calls, in order: stage(st); for each RUN of the stage run(ins, run), pipeline() and command() for each
    pipeline and command (nested ones included, in Script.visit order), run_end(); stage_end() after the stage's
    last instruction; finish() after the last stage. `st`, `ins` and `run_script` say where the walk is."""

    st: Stage
    ins: Instruction
    run_script: RunScript
    #: Set by run() for a RUN whose every command command() must see, whatever wants() says of its name.
    every_command: bool = False

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def wants(self, name: str, assigns: bool) -> bool:
        """Whether command() can act on a command of this name (`assigns`: it sets NAME=VALUE before the program).
        check_runs asks once per name and hands command() only the commands it wants: a RUN has tens of
        thousands of commands in a long Dockerfile, and most rules read only a few programs."""
        return True

    def stage(self, st: Stage) -> None:
        """A stage starts."""

    def run(self, ins: Instruction, run: RunScript) -> None:
        """A RUN, before its commands."""

    def pipeline(self, pipe: list[Command]) -> None:
        """One pipeline of the RUN (Script.all_pipelines order)."""

    def command(self, cmd: Command) -> None:
        """One command of the RUN (Script.commands order)."""

    def run_end(self) -> None:
        """After the RUN's last command."""

    def stage_end(self) -> None:
        """After the stage's last instruction."""

    def finish(self) -> None:
        """After the last stage."""
