"""A Dockerfile parser for the audit: instructions with their first line, stages and variable scopes.

It follows the Dockerfile frontend's classic syntax closely enough that every finding can name the line
a reader would look at: parser directives (``# escape=``), line continuations (comment and blank lines
inside them are dropped, as the builder does), JSON (exec) versus shell form, flags (``--from=``),
``ARG``/``ENV`` substitution with the builder's scoping rules (an ``ARG`` before the first ``FROM`` is
visible to ``FROM`` lines only; each stage starts with no ``ARG`` and inherits ``ENV`` only from a
stage it builds on) and multi-stage builds. Heredocs (``RUN <<EOF``) are read so that files using them
still parse. The base image's own environment is unknown here, so a reference to a variable nobody
declared (``$PATH``) is kept literally and reported as unresolved instead of being guessed. Substitution
and word splitting themselves are in envpin.audit.words.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from envpin.audit.scopes import Scope, StageScope
from envpin.audit.words import (
    Expansion,
    Var,
    count_words,
    expand,
    iter_words,
    split_words,
)
from envpin.errors import EnvpinError
from envpin.files.read import MAX_READ_BYTES, read_regular
from envpin.record import Value

__all__ = [
    "BUILTIN_ARGS",
    "INSTRUCTIONS",
    "MAX_TOTAL_EXPANSION",
    "Dockerfile",
    "DockerfileError",
    "Heredoc",
    "Instruction",
    "Pair",
    "Problem",
    "Stage",
    "parse",
    "read",
]


class DockerfileError(EnvpinError):
    """A Dockerfile that cannot be read or does not parse; the message starts with FILE:LINE."""

    def __init__(self, message: str, hint: str | None = None, line: int | None = None, reason: str = "") -> None:
        super().__init__(message, hint=hint)
        self.line = line
        self.reason = reason or message


@dataclass(frozen=True, slots=True)
class Problem(Value):
    """A line the builder would reject, kept as a finding when parsing tolerantly (the audit goes on)."""

    line: int
    message: str
    hint: str | None = None


INSTRUCTIONS = frozenset(
    {
        "ADD",
        "ARG",
        "CMD",
        "COPY",
        "ENTRYPOINT",
        "ENV",
        "EXPOSE",
        "FROM",
        "HEALTHCHECK",
        "LABEL",
        "MAINTAINER",
        "ONBUILD",
        "RUN",
        "SHELL",
        "STOPSIGNAL",
        "USER",
        "VOLUME",
        "WORKDIR",
    }
)
#: Instructions whose arguments may be JSON arrays (exec form).
_JSON_FORM = frozenset({"RUN", "CMD", "ENTRYPOINT", "SHELL", "COPY", "ADD", "VOLUME"})
#: Instructions that take --flags before their arguments.
_FLAGGED = frozenset({"FROM", "RUN", "COPY", "ADD", "HEALTHCHECK"})
_HEREDOC_FORM = frozenset({"RUN", "COPY", "ADD"})
_DIRECTIVES = frozenset({"syntax", "escape", "check"})
_DIRECTIVE_RE = re.compile(r"^#\s*([a-zA-Z][a-zA-Z0-9]*)\s*=\s*(.*?)\s*$")
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KEYWORD_RE = re.compile(r"^\s*(\S+)(.*)$", re.S)
_HEREDOC_RE = re.compile(r"^<<(-?)\s*(['\"]?)([A-Za-z0-9_.\-]+)\2$")
#: Arguments BuildKit defines in the global scope for every build (usable in FROM without an ARG).
BUILTIN_ARGS = {
    "BUILDPLATFORM": "linux/amd64",
    "BUILDOS": "linux",
    "BUILDARCH": "amd64",
    "BUILDVARIANT": "",
    "TARGETPLATFORM": "linux/amd64",
    "TARGETOS": "linux",
    "TARGETARCH": "amd64",
    "TARGETVARIANT": "",
}


# -- data ------------------------------------------------------------------------------------------
@dataclass(slots=True)
class Pair(Value):
    """One NAME=VALUE of ENV, ARG or LABEL: as written and after substitution. ``raw`` is the value as written
    (None: ARG without a default); ``text`` the whole NAME=VALUE token as written, reused when an ENV line is
    rewritten."""

    key: str
    raw: str | None
    text: str
    value: str | None = None
    unresolved: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Heredoc(Value):
    name: str
    body: str


@dataclass(slots=True)
class Instruction(Value):
    """One instruction; ``line`` is its first physical line, ``end_line`` its last (heredocs included).
    ``args`` is the text after the keyword and the flags, continuation lines joined as the builder joins them;
    ``flags_text`` the flags exactly as written (reused when FROM is rewritten); ``scope`` the variables
    visible while it runs (shared, immutable); ``legacy_env`` marks ``ENV NAME value`` (one pair, the value is
    the rest of the line)."""

    keyword: str
    line: int
    end_line: int
    args: str
    flags: dict[str, str | None] = field(default_factory=dict)
    flags_text: str = ""
    exec_form: list[str] | None = None
    heredocs: list[Heredoc] = field(default_factory=list)
    pairs: list[Pair] = field(default_factory=list)
    stage: int | None = None
    scope: Mapping[str, Var] = field(default_factory=Scope)
    workdir: str = "/"
    indent: str = ""
    legacy_env: bool = False


@dataclass(slots=True)
class Stage(Value):
    """One stage: ``image`` after substitution; ``parent`` the stage it builds FROM, if any; ``env`` and ``args``
    immutable scopes (each ENV makes a new one that shares the old)."""

    index: int
    name: str | None
    from_: Instruction
    image: str
    image_raw: str
    unresolved: tuple[str, ...]
    parent: int | None
    instructions: list[Instruction] = field(default_factory=list)
    env: Scope = field(default_factory=Scope)
    args: Scope = field(default_factory=Scope)
    workdir: str = "/"
    posix_shell: bool = True

    @property
    def label(self) -> str:
        return self.name or f"#{self.index}"


@dataclass(slots=True)
class Dockerfile(Value):
    """A parsed file. ``problems``: what could not be parsed (only with parse(..., tolerant=True); otherwise the
    first one raises). ``bom``: the text started with a UTF-8 byte order mark, and ``crlf``: every line ended
    with CR LF (both dropped from ``lines``; --fix writes them back)."""

    path: str
    lines: list[str]
    escape: str
    directives: dict[str, str]
    instructions: list[Instruction]
    global_args: dict[str, Var]
    stages: list[Stage]
    problems: list[Problem] = field(default_factory=list)
    bom: bool = False
    crlf: bool = False

    def stage(self, target: str | None = None) -> Stage:
        """The stage a build produces: the last one, or the one named by --target."""
        if target is None:
            return self.stages[-1]
        for st in self.stages:
            if st.name == target.lower() or (st.name is None and target == str(st.index)):
                return st
        names = ", ".join(s.name for s in self.stages if s.name) or "none"
        raise DockerfileError(f"{self.path}: no stage named '{target}' (stages: {names})")

    def chain(self, stage: Stage) -> list[Stage]:
        """The stage and the stages it builds on, root first."""
        out = [stage]
        while out[-1].parent is not None:
            out.append(self.stages[out[-1].parent])
        return out[::-1]


# -- parsing -----------------------------------------------------------------------------------------
def parse(
    text: str, path: str = "Dockerfile", build_args: Mapping[str, str] | None = None, *, tolerant: bool = False
) -> Dockerfile:
    """Parse Dockerfile text; raise DockerfileError('PATH:LINE: why') for anything the builder rejects.

    With tolerant=True nothing raises: each rejected instruction is left out and recorded in
    `Dockerfile.problems`, so the rest of the file can still be audited."""
    bom = text.startswith("\ufeff")
    if bom:
        text = text[1:]
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    crlf = False
    if "\r" in text:
        crlf = bool(lines) and all(ln.endswith("\r") for ln in lines)
        lines = [ln[:-1] if ln.endswith("\r") else ln for ln in lines]
    problems: list[Problem] = []

    def problem(exc: DockerfileError) -> None:
        if not tolerant:
            raise exc
        problems.append(Problem(exc.line or 1, exc.reason, exc.hint))

    escape, directives, first = _directives(lines, path, problem)
    instructions = list(_instructions(lines, first, escape, path, problem))
    df = Dockerfile(path, lines, escape, directives, instructions, {}, [], problems, bom, crlf)
    _resolve(df, dict(build_args or {}), problem)
    df.problems.sort(key=lambda x: x.line)
    return df


def _err(path: str, line: int, message: str, hint: str | None = None) -> DockerfileError:
    return DockerfileError(f"{path}:{line}: {message}", hint=hint, line=line, reason=message)


def _directives(
    lines: list[str], path: str, problem: Callable[[DockerfileError], None]
) -> tuple[str, dict[str, str], int]:
    """Parser directives: only at the very top, before any blank line, comment or instruction."""
    found: dict[str, str] = {}
    i = 0
    while i < len(lines):
        m = _DIRECTIVE_RE.match(lines[i].strip()) if lines[i].strip().startswith("#") else None
        if not m or m.group(1).lower() not in _DIRECTIVES:
            break
        name = m.group(1).lower()
        if name in found:
            problem(_err(path, i + 1, f"the '{name}' parser directive is given twice"))
        found.setdefault(name, m.group(2))
        i += 1
    escape = found.get("escape", "\\")
    if escape not in ("\\", "`"):
        line = next(n for n, ln in enumerate(lines, 1) if "escape" in ln.lower())
        problem(_err(path, line, f"invalid escape directive {escape!r}", hint="the escape character is \\ or `"))
        escape = "\\"
    return escape, found, i


def _continues(line: str, escape: str) -> tuple[str, bool]:
    """(line without the continuation character, whether the instruction continues on the next line)."""
    stripped = line.rstrip(" \t")
    if stripped.endswith(escape):
        return stripped[:-1], True
    return line, False


#: How many continuation lines are collected before they are joined into one piece.
_JOIN_EVERY = 1024


def _continued(
    lines: list[str], start: int, first: str, escape: str, path: str, problem: Callable[[DockerfileError], None]
) -> tuple[str, int]:
    """The logical line of an instruction whose line `start` (`first`, without its continuation character)
    continues: the following lines joined up to the first that does not continue, blank and comment lines between
    them skipped; and the index of that last line (len(lines) where the file ends first, which is a problem).
    A long chain is joined as it goes, so its pieces never all exist at once beside the file's lines."""
    i, n = start, len(lines)
    parts: list[str] = [first]
    joined: list[str] = []
    more = True
    while more:
        i += 1
        while i < n and (not lines[i].strip() or lines[i].lstrip().startswith("#")):
            i += 1
        if i >= n:
            problem(
                _err(
                    path,
                    start + 1,
                    "the instruction's last line ends with a line continuation, but the file ends there",
                    hint=f"remove the trailing {escape} or finish the instruction",
                )
            )
            break
        body, more = _continues(lines[i], escape)
        parts.append(body)
        if len(parts) >= _JOIN_EVERY:
            joined.append("".join(parts))
            parts = []
    return ("".join(joined + parts) if joined else "".join(parts)), i


def _instructions(
    lines: list[str], first: int, escape: str, path: str, problem: Callable[[DockerfileError], None]
) -> Iterator[Instruction]:
    i, n = first, len(lines)
    seen_from = False
    while i < n:
        line = lines[i]
        stripped = line.strip()
        if not stripped or stripped[0] == "#":
            i += 1
            continue
        start = i
        last = line[-1]
        logical, more = _continues(line, escape) if last == escape or last in " \t" else (line, False)
        if more:
            logical, i = _continued(lines, start, logical, escape, path, problem)
            if not logical.strip():  # only continuation characters (a lone escape line): no instruction
                i += 1
                continue
        i += 1
        try:
            ins = _instruction(logical, start + 1, i, escape, path)
        except DockerfileError as exc:
            problem(exc)
            continue
        if line[0].isspace():  # `line` is still the instruction's first line
            ins.indent = line[: len(line) - len(line.lstrip())]
        if ins.keyword in _HEREDOC_FORM and ins.exec_form is None and "<<" in ins.args:
            try:
                i = _read_heredocs(ins, lines, i, escape, path)
            except DockerfileError as exc:
                problem(exc)  # the heredoc ran to the end of the file: nothing after it is an instruction
                i = n
                continue
        ins.end_line = i
        if ins.keyword == "FROM":
            seen_from = True
        elif not seen_from and ins.keyword != "ARG":
            problem(
                _err(
                    path,
                    ins.line,
                    f"{ins.keyword} before the first FROM",
                    hint="only ARG (and comments or parser directives) may come before FROM",
                )
            )
            continue
        yield ins
    if not seen_from:
        problem(_err(path, 1, "no FROM instruction", hint="is this a Dockerfile?"))


def _read_heredocs(ins: Instruction, lines: list[str], i: int, escape: str, path: str) -> int:
    try:
        words = [w for w, _, _ in iter_words(ins.args, escape) if w.startswith("<<")]
    except ValueError:
        return i
    for word in words:
        if word.startswith("<<<"):
            continue
        m = _HEREDOC_RE.match(word)
        if not m:
            continue
        strip_tabs, name = bool(m.group(1)), m.group(3)
        body: list[str] = []
        while True:
            if i >= len(lines):
                raise _err(path, ins.line, f"heredoc <<{name} is never terminated", hint=f"end it with a line '{name}'")
            line = lines[i]
            i += 1
            if (line.lstrip("\t") if strip_tabs else line) == name:
                break
            body.append(line.lstrip("\t") if strip_tabs else line)
        ins.heredocs.append(Heredoc(name, "\n".join(body) + "\n"))
    return i


def _instruction(logical: str, line: int, end_line: int, escape: str, path: str) -> Instruction:
    # str.split() and the regex \s agree on what a blank is; the rest comes without its leading blanks
    word, *rest = logical.split(None, 1)  # the caller skips blank lines
    keyword = word.upper()
    if keyword not in INSTRUCTIONS:
        raise _err(path, line, f"unknown instruction '{word}'", hint="see the Dockerfile reference")
    ins = Instruction(keyword, line, end_line, rest[0].rstrip() if rest else "")
    try:
        if keyword in _FLAGGED and ins.args.startswith("--"):
            _take_flags(ins, escape)
        if keyword in _JSON_FORM and ins.args.startswith("["):
            try:
                value = json.loads(ins.args)
            except (ValueError, RecursionError):
                value = None  # not JSON (or nested past the decoder's limit): the builder uses shell form
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                ins.exec_form = value
        _check(ins, escape, path)
    except ValueError as exc:
        raise _err(path, line, _prefixed(keyword, str(exc))) from None
    return ins


def _prefixed(keyword: str, message: str) -> str:
    return message if message.startswith(keyword) else f"{keyword}: {message}"


_BLANKS = re.compile(r"\s*")  # what str.lstrip() removes


def _lstripped(text: str, pos: int) -> int:
    """Where text[pos:].lstrip() would start, without copying the text."""
    m = _BLANKS.match(text, pos)
    return m.end() if m else pos


def _take_flags(ins: Instruction, escape: str) -> None:
    """Move the leading --flags out of ins.args. The whole text must split into words (as the builder splits it);
    the flags are then read one word at a time, so a long RUN with flags is not split again per flag."""
    args = ins.args
    if not args.startswith("--"):
        return
    for _ in iter_words(args, escape):  # raises ValueError for a quote left open anywhere
        pass
    taken: list[str] = []
    pos = 0
    while args.startswith("--", pos):
        raw, _, end = next(iter_words(args, escape, pos))
        pos = _lstripped(args, end)
        if raw == "--":
            break
        name, _, value = raw[2:].partition("=")
        ins.flags[name.lower()] = value if "=" in raw else None
        taken.append(raw)
    ins.args = args[pos:]
    ins.flags_text = " ".join(taken)


def _check(ins: Instruction, escape: str, path: str) -> None:
    """What the builder itself refuses, plus the NAME=VALUE pairs of ENV, ARG and LABEL."""
    kw, args = ins.keyword, ins.args
    if kw in ("ENV", "LABEL"):
        _pairs(ins, escape)
    elif kw == "ARG":
        _arg_pairs(ins, escape)
    elif kw == "FROM":
        words = split_words(args, escape)
        if len(words) not in (1, 3) or (len(words) == 3 and words[1][0].lower() != "as"):
            raise ValueError("FROM takes an image and optionally AS NAME")
    elif kw in ("COPY", "ADD"):
        count = len(ins.exec_form) if ins.exec_form is not None else count_words(args, escape)
        if count < 2 and not (count == 1 and args.startswith("<<")):
            raise ValueError(f"{kw} needs a source and a destination")
    elif kw in ("RUN", "WORKDIR", "USER", "ONBUILD", "SHELL", "MAINTAINER", "STOPSIGNAL", "EXPOSE", "VOLUME"):
        if not args and ins.exec_form is None:
            raise ValueError(f"{kw} needs an argument")
        if kw == "SHELL" and ins.exec_form is None:
            raise ValueError('SHELL must be a JSON array, e.g. SHELL ["/bin/bash", "-c"]')
        if kw == "ONBUILD":
            inner = _KEYWORD_RE.match(args)
            inner_kw = inner.group(1).upper() if inner else ""
            if inner_kw not in INSTRUCTIONS or inner_kw in ("ONBUILD", "FROM", "MAINTAINER"):
                raise ValueError(f"ONBUILD cannot trigger {inner_kw or 'nothing'}")


def _pairs(ins: Instruction, escape: str) -> None:
    """The NAME=VALUE pairs of an ENV or LABEL, or its one legacy NAME VALUE pair (the rest of the line)."""
    kw, args = ins.keyword, ins.args
    words = split_words(args, escape)
    if not words:
        raise ValueError(f"{kw} needs NAME=VALUE")
    if "=" not in words[0][0]:  # the legacy form: NAME VALUE (the rest of the line)
        if len(words) < 2:
            raise ValueError(f"{kw} {words[0][0]} has no value (write {kw} {words[0][0]}=VALUE)")
        value = args[words[1][1] :].strip()
        ins.pairs = [Pair(words[0][0], value, args)]
        ins.legacy_env = True
        return
    for raw, _, _ in words:
        key, eq, value = raw.partition("=")
        if not eq or not key:
            raise ValueError(f"cannot find NAME=VALUE in {raw!r}")
        ins.pairs.append(Pair(_unquote(key, escape), value, raw))


def _arg_pairs(ins: Instruction, escape: str) -> None:
    """The NAME[=DEFAULT] pairs of an ARG, each name one the builder accepts."""
    words = split_words(ins.args, escape)
    if not words:
        raise ValueError("ARG needs a name")
    for raw, _, _ in words:
        key, eq, value = raw.partition("=")
        if not _NAME_RE.fullmatch(key):
            raise ValueError(f"{key!r} is not a valid argument name")
        ins.pairs.append(Pair(key, value if eq else None, raw))


def _unquote(word: str, escape: str) -> str:
    return expand(word, {}, escape=escape, closed=False).value


# -- stages and scopes -------------------------------------------------------------------------------
#: How many characters substitution may add to the ARG, ENV, LABEL, WORKDIR and FROM values of one file in all:
#: with MAX_EXPANSION per value this bounds what a file of N lines can make the parser hold.
MAX_TOTAL_EXPANSION = 16 << 20


class _Budget:
    """What substitution has added so far in one file (MAX_TOTAL_EXPANSION). The line that passes the bound is
    reported once; after it values are kept as written, so the rest of the file is still audited."""

    __slots__ = ("added",)

    def __init__(self) -> None:
        self.added = 0

    def expand(self, raw: str, scope: Mapping[str, Var], esc: str, closed: bool = False) -> Expansion:
        if self.added > MAX_TOTAL_EXPANSION:
            return expand(raw, _NOTHING, escape=esc, closed=False)  # quotes removed, references kept
        e = expand(raw, scope, escape=esc, closed=closed, strict_size=True)
        self.added += max(0, len(e.value) - len(raw))
        if self.added > MAX_TOTAL_EXPANSION:
            raise ValueError(
                f"variable substitution in this file adds more than {MAX_TOTAL_EXPANSION:,} "
                "characters in all; later values are kept as written"
            )
        return e


_NOTHING = Scope()


def _resolve(df: Dockerfile, build_args: dict[str, str], problem: Callable[[DockerfileError], None]) -> None:
    """Walk the instructions once, applying ARG/ENV scoping to give every instruction its variables. Scopes are
    persistent (envpin.audit.scopes): an instruction keeps the one it saw, shared with its neighbours.

    An instruction that fails here (tolerant parsing) is left out of the stages, as the builder would stop."""
    state = _State(Scope({k: Var(k, v, 0, "builtin") for k, v in BUILTIN_ARGS.items()}), _Budget())
    names: dict[str, int] = {}
    kept = []
    for ins in df.instructions:
        if not df.stages and ins.keyword not in ("ARG", "FROM"):
            continue  # its FROM was rejected (and reported)
        try:
            _apply(df, ins, state, names, build_args, df.escape)
        except ValueError as exc:
            problem(_err(df.path, ins.line, _prefixed(ins.keyword, str(exc))))
            continue
        kept.append(ins)
    df.instructions = kept
    df.global_args = {k: v for k, v in state.glob.items() if v.kind != "builtin"}


class _State:
    """The walk's state: the global ARGs, the expansion budget, and the scope the current stage's
    instructions share until an ARG or ENV changes it."""

    __slots__ = ("budget", "glob", "view")

    def __init__(self, glob: Scope, budget: _Budget) -> None:
        self.glob, self.budget = glob, budget
        self.view: StageScope | None = None


def _apply(
    df: Dockerfile, ins: Instruction, state: _State, names: dict[str, int], build_args: dict[str, str], esc: str
) -> None:
    """Give `ins` its stage, scope and working directory, and apply what it declares. Nothing is written
    into a scope an instruction holds: each ARG or ENV makes new (shared) scopes."""
    budget = state.budget
    if ins.keyword == "ARG" and not df.stages:
        ins.scope = state.glob
        glob = state.glob
        for p in ins.pairs:
            glob = glob.set(p.key, _arg(p, ins, glob, build_args, esc, budget, closed=True, outer=None))
        state.glob = glob
        return
    if ins.keyword == "FROM":
        _start_stage(df, ins, state, names, esc)
        return
    st = df.stages[-1]
    workdir = st.workdir  # where the instruction runs (a WORKDIR changes it for the next ones)
    scope = state.view
    if scope is None:
        scope = state.view = StageScope(st.env, st.args)
    if ins.keyword == "ARG":
        args = st.args
        for p in ins.pairs:
            args = args.set(p.key, _arg(p, ins, scope, build_args, esc, budget, closed=False, outer=state.glob))
        st.args, state.view = args, None  # the next instruction sees what this one declares
    elif ins.keyword == "ENV":
        env = st.env
        for p in ins.pairs:
            e = budget.expand(p.raw or "", scope, esc)
            p.value, p.unresolved = e.value, e.unresolved
            env = env.set(p.key, Var(p.key, e.value, ins.line, "ENV", e.unresolved))
        st.env, state.view = env, None
    elif ins.keyword == "LABEL":
        for p in ins.pairs:
            e = budget.expand(p.raw or "", scope, esc)
            p.value, p.unresolved = e.value, e.unresolved
    elif ins.keyword == "WORKDIR":
        path = budget.expand(ins.args, scope, esc).value
        st.workdir = posixpath.normpath(posixpath.join(st.workdir, path))
    elif ins.keyword == "SHELL" and ins.exec_form:
        st.posix_shell = posixpath.basename(ins.exec_form[0]).lower() in ("sh", "bash", "dash", "zsh", "ash", "ksh")
    ins.stage = st.index
    st.instructions.append(ins)
    ins.scope = scope
    ins.workdir = workdir


def _start_stage(df: Dockerfile, ins: Instruction, state: _State, names: dict[str, int], esc: str) -> None:
    """A FROM: the stage it starts (named in `names`), which shares the ENV, working directory and shell of the
    stage it is built on, if any."""
    words = [w for w, _, _ in split_words(ins.args, esc)]
    ins.scope = state.glob
    e = state.budget.expand(words[0], state.glob, esc, closed=True)
    name = _unquote(words[2], esc).lower() if len(words) == 3 else None
    if name is not None and name in names:
        raise ValueError(
            f"stage name '{name}' is already used by the stage on line {df.stages[names[name]].from_.line}"
        )
    parent = names.get(e.value.lower())
    st = Stage(len(df.stages), name, ins, e.value, words[0], e.unresolved, parent)
    if parent is not None:
        up = df.stages[parent]
        st.env, st.workdir, st.posix_shell = up.env, up.workdir, up.posix_shell  # shared, never copied
    ins.stage = st.index
    ins.workdir = st.workdir
    st.instructions.append(ins)
    df.stages.append(st)
    state.view = None
    if name is not None:
        names[name] = st.index


def _arg(
    p: Pair,
    ins: Instruction,
    scope: Mapping[str, Var],
    build_args: dict[str, str],
    esc: str,
    budget: _Budget,
    *,
    closed: bool,
    outer: Mapping[str, Var] | None,
) -> Var:
    """The Var one NAME[=VALUE] of an ARG declares (a --build-arg wins over the default)."""
    if p.key in build_args:
        value: str | None = build_args[p.key]
        unresolved: tuple[str, ...] = ()
        kind = "build-arg"
    elif p.raw is not None:
        e = budget.expand(p.raw, scope, esc, closed=closed)
        value, unresolved, kind = e.value, e.unresolved, "ARG"
    elif outer is not None and p.key in outer:
        # `ARG NAME` inside a stage takes the global default (the only way FROM-scope args get in).
        value, unresolved, kind = outer[p.key].value, outer[p.key].unresolved, "ARG"
    else:
        value, unresolved, kind = None, (), "ARG"
    p.value, p.unresolved = value, unresolved
    return Var(p.key, value, ins.line, kind, unresolved)


#: The largest Dockerfile the audit reads (envpin.files.read.MAX_READ_BYTES): a real one is kilobytes.
MAX_DOCKERFILE_BYTES = MAX_READ_BYTES


def read(path: str, build_args: Mapping[str, str] | None = None, *, tolerant: bool = False) -> Dockerfile:
    """Read and parse a file; unreadable, binary or non-UTF-8 files raise DockerfileError (even when tolerant:
    there is nothing to audit in them)."""
    try:
        raw = read_regular(path, MAX_DOCKERFILE_BYTES)
    except FileNotFoundError:
        raise DockerfileError(f"{path}: no such file", hint="check the path") from None
    except IsADirectoryError:
        raise DockerfileError(f"{path}: is a directory, not a Dockerfile", hint="name the Dockerfile itself") from None
    except OSError as exc:
        raise DockerfileError(
            f"{path}: cannot read: {exc.strerror or exc}", hint="name the Dockerfile itself (a regular file)"
        ) from None
    if b"\0" in raw:
        line = raw[: raw.index(b"\0")].count(b"\n") + 1
        raise DockerfileError(f"{path}:{line}: binary file (NUL byte), not a Dockerfile")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DockerfileError(f"{path}:{line}: not UTF-8 text (byte 0x{raw[exc.start]:02x})") from None
    del raw  # not needed while parsing: a 10 MB file is then held once as text, not also as bytes
    return parse(text, path, build_args, tolerant=tolerant)
