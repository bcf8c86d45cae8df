"""git: clones pinned to a commit by a later checkout in their stage (or `git clone --revision=SHA`)."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

from envpin.audit.check import COMMIT, Check, Context, RunRule
from envpin.audit.parser import Instruction, Stage
from envpin.audit.rule import EXAMPLE_BASE, Rule
from envpin.audit.shell import Command, RunScript
from envpin.record import Value

_COMMIT_EXAMPLE = "3c8d6e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d"  # a placeholder: check out the commit you reviewed
_GIT_CLONE = ("git clone (--branch, --revision)", "https://git-scm.com/docs/git-clone")

GIT_CLONE_UNPINNED = Rule(
    id="git-clone-unpinned",
    severity="warning",
    title="git clone without a pinned commit",
    finds="`git clone` of a branch not followed (in that `RUN` or a later one of the stage) by a checkout of a "
    "commit in its directory; a `$VARIABLE` checkout counts as a commit unless its value is known and is "
    "not one.",
    why="A clone of a branch or tag gets whatever the branch points to at build time. Check out a "
    "commit: git clone URL dir && git -C dir checkout SHA (or git clone --revision=SHA).",
    bad=EXAMPLE_BASE + "RUN git clone https://github.com/NVIDIA/DeepLearningExamples.git /opt/dle\n",
    good=EXAMPLE_BASE + "RUN git clone https://github.com/NVIDIA/DeepLearningExamples.git /opt/dle \\\n"
    f" && git -C /opt/dle checkout {_COMMIT_EXAMPLE}\n",
    autofix="Leaves a comment above the instruction: which commit to build is a choice the audit cannot make.",
    references=(_GIT_CLONE, ("Not checked", "#not-checked")),
)

GIT_CLONE_TAG = Rule(
    id="git-clone-tag",
    severity="info",
    title="git clone pinned to a release tag, not a commit",
    finds="`git clone --branch v2.4.3` (or a checkout of a release tag) without a commit: better than a branch, "
    "but tags can move.",
    why="A tag is better than a branch, but it can be deleted and pushed again pointing elsewhere (and "
    "some projects move tags such as v2 or latest). Check out the commit the tag names now.",
    bad=EXAMPLE_BASE + "RUN git clone --branch v0.28.1 https://github.com/horovod/horovod.git /opt/horovod\n",
    good=EXAMPLE_BASE + "RUN git clone --branch v0.28.1 https://github.com/horovod/horovod.git /opt/horovod \\\n"
    f" && git -C /opt/horovod checkout {_COMMIT_EXAMPLE}\n",
    autofix="Leaves a comment above the instruction: the commit the tag names must be looked up in the remote.",
    references=(_GIT_CLONE,),
)

RULES: tuple[Rule, ...] = (GIT_CLONE_UNPINNED, GIT_CLONE_TAG)


_GIT_GLOBAL_VALUE = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path"})
_CLONE_VALUE = frozenset(
    {
        "-b",
        "--branch",
        "--depth",
        "-o",
        "--origin",
        "-c",
        "--config",
        "--reference",
        "--reference-if-able",
        "--separate-git-dir",
        "-u",
        "--upload-pack",
        "--template",
        "-j",
        "--jobs",
        "--filter",
        "--shallow-since",
        "--shallow-exclude",
        "--revision",
        "--server-option",
        "--bundle-uri",
    }
)


@dataclass(slots=True)
class _Clone(Value):
    """One clone of the stage, until a later checkout in its directory pins it; ``tag``: a release tag it is
    pinned to (which can move, unlike a commit)."""

    ins: Instruction
    url: str
    path: str
    pinned: bool
    tag: str | None = None


def _git(cmd: Command, cwd: str) -> tuple[str, list[str], str] | None:
    """(subcommand, its arguments, the directory it runs in) for a git command."""
    if cmd.name != "git":
        return None
    argv, i = cmd.argv, 1
    where = cwd
    while i < len(argv) and argv[i].startswith("-"):
        if argv[i] in _GIT_GLOBAL_VALUE:
            if argv[i] == "-C" and i + 1 < len(argv):
                where = posixpath.normpath(posixpath.join(where, argv[i + 1]))
            i += 2
        else:
            i += 1
    if i >= len(argv):
        return None
    return argv[i], argv[i + 1 :], where


class _Git(RunRule):
    """git-clone-unpinned and git-clone-tag: each clone of a stage, pinned when a later checkout in the stage
    names a commit (or a tag) in its directory."""

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.clones: list[_Clone] = []
        self.cwd = "/"
        self.fetched: set[str] = set()

    def stage(self, st: Stage) -> None:
        self.clones = []

    def run(self, ins: Instruction, run: RunScript) -> None:
        self.cwd = ins.workdir
        self.fetched = set()

    def wants(self, name: str, assigns: bool) -> bool:
        return name in ("cd", "pushd", "git")

    def command(self, cmd: Command) -> None:
        if cmd.name in ("cd", "pushd") and len(cmd.argv) > 1 and "$" not in cmd.argv[1]:
            self.cwd = posixpath.normpath(posixpath.join(self.cwd, cmd.argv[-1]))
            return
        if cmd.name != "git":
            return
        call = _git(cmd, self.cwd)
        if call is None:
            return
        sub, args, where = call
        ins, clones = self.ins, self.clones
        if sub == "clone":
            clones.append(_clone(ins, args, where))
        elif sub in ("checkout", "switch", "reset"):
            refs = [_ref_value(a, ins) for a in args if not a.startswith("-")]
            if any(r is None or COMMIT.match(r) for r in refs) or ("FETCH_HEAD" in refs and where in self.fetched):
                _pin(clones, where)
            elif any(_TAG.match(r) for r in refs if r):
                _pin(clones, where, tag=next(r for r in refs if r and _TAG.match(r)))
        elif sub == "fetch" and any(COMMIT.match(a) for a in args):
            self.fetched.add(where)

    def stage_end(self) -> None:
        for c in self.clones:
            if c.pinned:
                continue
            if c.tag is not None:
                self.ctx.add(
                    GIT_CLONE_TAG,
                    c.ins.line,
                    f"git clone {c.url} is pinned to the tag {c.tag}, which can be moved or re-created",
                    f"check out the commit the tag names: git -C {c.path} checkout SHA",
                )
            else:
                self.ctx.add(
                    GIT_CLONE_UNPINNED,
                    c.ins.line,
                    f"git clone {c.url} is not pinned to a commit (it gets whatever the branch holds today)",
                    f"check out a commit after cloning: git -C {c.path} checkout SHA",
                )


#: A release tag: v2.4.3, 1.15.5, r2.4, v0.19.0-rc1 (a branch name such as main or release/2.4 is not).
_TAG = re.compile(r"^(v|r|release-|version-)?[0-9]+(\.[0-9]+)+([-.+][0-9A-Za-z.]+)?$")
_VAR_REF = re.compile(r"^\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))$")


def _ref_value(ref: str, ins: Instruction) -> str | None:
    """The ref a checkout names: a $VARIABLE is looked up in the RUN's ARG/ENV scope; None when the audit cannot
    know its value (a build argument without a default), which counts as a commit: the clone is not flagged."""
    m = _VAR_REF.match(ref)
    if not m:
        return ref
    var = ins.scope.get(m.group(1) or m.group(2))
    return var.value if var is not None and var.value else None


def _clone(ins: Instruction, args: list[str], cwd: str) -> _Clone:
    """A `git clone` call: its URL, the directory it clones into, and whether --revision/--branch pin it."""
    positional: list[str] = []
    pinned = False
    tag = None
    i = 0
    while i < len(args):
        tok = args[i]
        name, _, value = tok.partition("=")
        if tok in _CLONE_VALUE:
            value = args[i + 1] if i + 1 < len(args) else ""
            name = tok
            i += 1
        if name == "--revision" and COMMIT.match(value):
            pinned = True
        if name in ("-b", "--branch") and _TAG.match(value):
            tag = value
        if not tok.startswith("-"):
            positional.append(tok)
        i += 1
    url = positional[0] if positional else "?"
    target = positional[1] if len(positional) > 1 else posixpath.basename(url.rstrip("/")).removesuffix(".git")
    return _Clone(ins, url, posixpath.normpath(posixpath.join(cwd, target)), pinned, tag)


def _pin(clones: list[_Clone], where: str, tag: str | None = None) -> None:
    """Mark the clone checked out in `where` as pinned (to a commit), or as pinned to a release tag."""
    for matching in (
        lambda c: c.path == where or posixpath.basename(c.path) == posixpath.basename(where),
        lambda c: True,
    ):
        for c in reversed(clones):
            if not c.pinned and matching(c):
                if tag is None:
                    c.pinned = True
                else:
                    c.tag = tag
                return


CHECKS: tuple[Check, ...] = ()
RUN_RULES: tuple[type[RunRule], ...] = (_Git,)
