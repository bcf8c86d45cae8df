"""What the audit could not read or was told wrongly: lines the builder rejects, RUN text that cannot be split
into words, and inline suppressions that name no rule."""

from __future__ import annotations

from envpin.audit.check import Check, Finding, RunRule, finding
from envpin.audit.parser import Dockerfile, Instruction
from envpin.audit.rule import EXAMPLE_BASE, Rule
from envpin.audit.shell import RunScript

_PARSER = ("Parser", "#parser")

PARSE_ERROR = Rule(
    id="parse-error",
    severity="error",
    title="a line the builder rejects",
    finds="A line the builder rejects (unknown instruction, a `RUN` continuation lost, an instruction before "
    "`FROM`, ...): reported with the builder's reason, and the rest of the file is still audited.",
    why="Docker stops the build at this line. The audit checked the rest of the file as if the line were "
    "not there. Fix the line; a common cause is a RUN whose previous line lost its trailing "
    "backslash, so the next command reads as an instruction.",
    bad=EXAMPLE_BASE + "RUN apt-get update \\\n"
    " && apt-get install -y --no-install-recommends curl=7.81.0-1ubuntu1.15\n"
    "    rm -rf /var/lib/apt/lists/*\n",
    good=EXAMPLE_BASE + "RUN apt-get update \\\n"
    " && apt-get install -y --no-install-recommends curl=7.81.0-1ubuntu1.15 \\\n"
    " && rm -rf /var/lib/apt/lists/*\n",
    autofix="`--fix` refuses a file with this finding (exit 2, nothing written): it rewrites only files it fully "
    "understands.",
    references=(_PARSER, ("Dockerfile reference", "https://docs.docker.com/reference/dockerfile/")),
    suppressible=False,
)

SHELL_UNPARSED = Rule(
    id="shell-unparsed",
    severity="info",
    title="RUN command could not be split into words",
    finds="A `RUN` (in a stage with a POSIX shell) that cannot be split into words as the shell would, usually "
    "for an unterminated quote: its commands are not checked.",
    why="The audit could not split the command (an unterminated quote, usually), so it was not checked.",
    bad=EXAMPLE_BASE + 'RUN echo "training image >> /etc/motd\n',
    good=EXAMPLE_BASE + 'RUN echo "training image" >> /etc/motd\n',
    autofix="Leaves a comment above the instruction: which quote is missing is for a person to see.",
    references=(_PARSER,),
)

SUPPRESSION_UNKNOWN = Rule(
    id="suppression-unknown",
    severity="warning",
    title="an inline suppression names no rule",
    finds="A `# envpin: ignore=...` comment names a rule that does not exist (or `parse-error`, which cannot be "
    "suppressed), so it silences nothing.",
    why="A `# envpin: ignore=...` comment names a rule that does not exist (or parse-error, which cannot be "
    "suppressed), so it silences nothing: usually a typo. Use the rule id the finding shows.",
    bad=EXAMPLE_BASE + "# envpin: ignore=pip-unpined\n"
    "RUN pip install --no-cache-dir -r /opt/app/requirements-dev.txt\n",
    good=EXAMPLE_BASE + "# envpin: ignore=pip-requirements-file\n"
    "RUN pip install --no-cache-dir -r /opt/app/requirements-dev.txt\n",
    autofix="Leaves a comment above the line: which rule was meant is for a person to say.",
    references=(("Configuration and suppressions", "#configuration-and-suppressions"),),
)

RULES: tuple[Rule, ...] = (PARSE_ERROR, SHELL_UNPARSED, SUPPRESSION_UNKNOWN)


def parse_errors(df: Dockerfile) -> list[Finding]:
    """A parse-error finding for each line the parser (tolerant, as the plain audit reads) set aside."""
    return [finding(PARSE_ERROR, df.path, p.line, p.message, p.hint or "fix or remove the line") for p in df.problems]


class _ShellSyntax(RunRule):
    """shell-unparsed: a RUN whose text could not be split into words."""

    def run(self, ins: Instruction, run: RunScript) -> None:
        if run.error and self.st.posix_shell:
            self.ctx.add(
                SHELL_UNPARSED,
                ins.line,
                f"RUN could not be split into words: {run.error}",
                "check the quoting of this RUN",
            )


CHECKS: tuple[Check, ...] = ()
RUN_RULES: tuple[type[RunRule], ...] = (_ShellSyntax,)
