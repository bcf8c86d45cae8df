"""apt: packages installed without versions or a dated snapshot source, in every stage."""

from __future__ import annotations

import re

from envpin.audit.check import Check, Context, RunRule
from envpin.audit.parser import Instruction, Stage
from envpin.audit.rule import EXAMPLE_BASE, Rule
from envpin.audit.shell import Command, RunScript

APT_UNPINNED = Rule(
    id="apt-unpinned",
    severity="warning",
    title="apt installs packages without versions or a snapshot",
    finds="`apt-get`/`apt`/`aptitude install` of packages without `=version`, in a stage without a snapshot "
    "source (a `snapshot.ubuntu.com` or `snapshot.debian.org` URL written earlier in the stage or a stage "
    "it is built on, or `--snapshot`).",
    why="apt-get install NAME installs the archive's current version. Pin versions (NAME=VERSION) or "
    "point apt at a dated snapshot (snapshot.ubuntu.com, snapshot.debian.org).",
    bad=EXAMPLE_BASE + "RUN apt-get update && apt-get install -y --no-install-recommends curl\n",
    good=EXAMPLE_BASE + "RUN apt-get update && apt-get install -y --no-install-recommends curl=7.81.0-1ubuntu1.15\n",
    autofix="Leaves a comment above the instruction: the version to pin, or the snapshot date, is a choice the "
    "audit cannot make.",
    references=(
        ("Ubuntu snapshot service", "https://snapshot.ubuntu.com/"),
        ("Debian snapshot archive", "https://snapshot.debian.org/"),
    ),
)

RULES: tuple[Rule, ...] = (APT_UNPINNED,)

SNAPSHOT_HOSTS = ("snapshot.debian.org", "snapshot.ubuntu.com")
_SNAPSHOT_HOST = re.compile("|".join(map(re.escape, SNAPSHOT_HOSTS)))
_APT_NAMES = frozenset({"apt-get", "apt", "aptitude"})
#: A snapshot host with quotes or backslashes anywhere inside it (text that may become a word naming the host).
_QUOTED_SNAPSHOT_HOST = re.compile("|".join("[\"'\\\\]*".join(map(re.escape, h)) for h in SNAPSHOT_HOSTS))
_APT_VALUE = frozenset({"-o", "-c", "-t", "--option", "--config-file", "--target-release", "--default-release"})


class _Apt(RunRule):
    """apt-unpinned. Whether a snapshot source is set up is carried through the stage: a stage starts with its
    parent's state, so a chain of N stages costs N steps, not N² (stages build only on earlier ones)."""

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.ended: dict[int, bool] = {}
        self.snapshot = False

    def stage(self, st: Stage) -> None:
        self.snapshot = self.ended.get(st.parent, False) if st.parent is not None else False

    def run(self, ins: Instruction, run: RunScript) -> None:
        # a heredoc that writes sources.list comes before the commands that use it
        if len(run.texts) > 1 and not self.snapshot:
            self.snapshot = any(h in t for t in run.texts[1:] for h in SNAPSHOT_HOSTS)
        # Every command is searched for a snapshot host only where one may be: a word of a command is its text
        # with quotes and escapes taken off (heredoc bodies are substituted again before they are split).
        self.every_command = bool(ins.heredocs) or (
            bool(run.texts) and _QUOTED_SNAPSHOT_HOST.search(run.texts[0]) is not None
        )

    def wants(self, name: str, assigns: bool) -> bool:
        return name in _APT_NAMES

    def command(self, cmd: Command) -> None:
        # no host name has a blank, so one found in the joined words lies inside one word
        if _SNAPSHOT_HOST.search(" ".join(cmd.argv)):
            self.snapshot = True
        pkgs = _apt_install(cmd)
        if pkgs is None or pkgs[1]:  # not apt install, or apt --snapshot ID
            return
        loose = [
            p
            for p in pkgs[0]
            if "=" not in p
            and "$" not in p
            and "…" not in p
            and not p.endswith(".deb")
            and not p.startswith(("/", "./"))
        ]
        if loose and not self.snapshot:
            self.ctx.add(
                APT_UNPINNED,
                self.ins.line,
                f"{cmd.name} install without versions or a snapshot source: {', '.join(loose)}",
                "pin versions (NAME=VERSION) or install from a dated snapshot.ubuntu.com / snapshot.debian.org source",
            )

    def run_end(self) -> None:
        if not self.snapshot and any(map(_SNAPSHOT_HOST.search, self.run_script.texts)):
            self.snapshot = True

    def stage_end(self) -> None:
        self.ended[self.st.index] = self.snapshot


def _apt_install(cmd: Command) -> tuple[list[str], bool] | None:
    """(packages, uses --snapshot) for apt-get/apt install, else None."""
    if cmd.name not in _APT_NAMES:
        return None
    positional: list[str] = []
    snapshot = False
    i = 1
    argv = cmd.argv
    while i < len(argv):
        tok = argv[i]
        if tok in _APT_VALUE:
            value = argv[i + 1] if i + 1 < len(argv) else ""
            snapshot = snapshot or "snapshot" in value.lower()
            i += 2
            continue
        if tok in ("-S", "--snapshot") or tok.startswith("--snapshot="):
            snapshot = True
            i += 2 if tok in ("-S", "--snapshot") else 1
            continue
        if tok.startswith("-"):
            snapshot = snapshot or ("snapshot" in tok.lower() and tok.startswith("-o"))
        else:
            positional.append(tok)
        i += 1
    if not positional or positional[0] != "install":
        return None
    return positional[1:], snapshot


CHECKS: tuple[Check, ...] = ()
RUN_RULES: tuple[type[RunRule], ...] = (_Apt,)
