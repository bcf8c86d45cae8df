"""`envpin audit --fix`: a corrected Dockerfile where the fix is mechanical, comments where it is not.

Mechanical: pin FROM by the digest the registry reports for the tag now; set the determinism recipe's
ENV block right after the produced stage's FROM (only the variables that are missing or wrong; wrong
settings elsewhere in the stage chain are removed so they cannot override it); remove
TF_CUDNN_USE_AUTOTUNE and the misspelt TF_USE_CUDNN_AUTOTUNE. Every other finding gets a
``# envpin audit: <id>: <fix>`` comment above its instruction. Lines that need no change are copied byte
for byte.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from envpin.audit.base import identify
from envpin.audit.check import Finding
from envpin.audit.parser import Dockerfile, Instruction, Stage, parse
from envpin.audit.rule import IGNORE_MARK as _IGNORE_MARK
from envpin.audit.rules.base_image import FROM_LATEST, FROM_NO_DIGEST
from envpin.audit.rules.determinism import (
    CUDNN_AUTOTUNE_SET,
    D9M_ENV_MISSING,
    D9M_ENV_WRONG,
    D9M_VARS,
    ENV_NO_EFFECT,
    PYTHONHASHSEED_UNSET,
    TRUE,
    seed_ok,
)
from envpin.audit.rules.horovod import HOROVOD_FUSION_THRESHOLD
from envpin.audit.words import Var, split_words
from envpin.errors import EnvpinError
from envpin.knowledge import recipes
from envpin.portable import imageref
from envpin.record import Value

MARKER = "# envpin audit: recipe "
_D9M_RULES = frozenset({D9M_ENV_MISSING.id, D9M_ENV_WRONG.id})
#: Rules whose fix is the recipe's ENV block after the produced stage's FROM.
_ENV_RULES = _D9M_RULES | {PYTHONHASHSEED_UNSET.id, HOROVOD_FUSION_THRESHOLD.id}
_FROM_RULES = frozenset({FROM_NO_DIGEST.id, FROM_LATEST.id})
#: Rules whose fix is removing the variable from every ENV of the image.
_REMOVE_RULES = frozenset({CUDNN_AUTOTUNE_SET.id, ENV_NO_EFFECT.id})
#: The three sets say how --fix handles each fixable Dockerfile rule (FROM rules only when the digest can be
#: resolved); tests/unit/test_audit_rules_registry.py checks they cover exactly those (envpin.audit.MECHANICAL).


@dataclass(slots=True)
class FixOutcome(Value):
    """A fixed text, the findings fixed and those given a comment, and what was done (for the report)."""

    text: str
    fixed: list[Finding] = field(default_factory=list)
    commented: list[Finding] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Edits(Value):
    """Lines to insert before and after a line, and line ranges replaced (first line -> (last line, new))."""

    before: dict[int, list[str]] = field(default_factory=dict)
    after: dict[int, list[str]] = field(default_factory=dict)
    ranges: dict[int, tuple[int, list[str]]] = field(default_factory=dict)

    def render(self, lines: list[str], newline: str = "\n") -> str:
        out: list[str] = []
        i = 1
        while i <= len(lines):
            out.extend(self.before.get(i, []))
            if i in self.ranges:
                last, new = self.ranges[i]
                out.extend(new)
            else:
                last = i
                out.append(lines[i - 1])
            out.extend(self.after.get(last, []))
            i = last + 1
        return "".join(line + newline for line in out)


def fix(
    df: Dockerfile,
    findings: list[Finding],
    *,
    target: str | None = None,
    tf: str | None = None,
    resolve: Callable[[str], str] | None = None,
    build_args: dict[str, str] | None = None,
) -> FixOutcome:
    """Apply the mechanical fixes and comment the rest; the result is re-parsed before it is returned.

    Only the Dockerfile's own findings are its to fix: those in the requirements files it copies in from the
    build context point at lines of those files, and stay in the re-audit of the fixed file."""
    findings = [f for f in findings if f.file == df.path]
    edits = _Edits()
    outcome = FixOutcome("")
    by_line = {ins.line: ins for ins in df.instructions}
    stage_of = {st.from_.line: st for st in df.stages}
    handled: set[Finding] = set()
    moved: dict[int, int] = {}  # notes moved above a suppression comment, per line

    for f in findings:
        if f.rule in _FROM_RULES and resolve is not None:
            _pin_from(edits, by_line[f.line], stage_of[f.line], resolve, outcome)
            handled.add(f)

    stage = df.stage(target)
    env_findings = [f for f in findings if f.rule in _ENV_RULES]
    removals = [f for f in findings if f.rule in _REMOVE_RULES]
    if env_findings or removals:
        _env_block(df, stage, env_findings, bool(removals), tf, edits, outcome)
        handled.update(env_findings)
        handled.update(removals)

    for f in findings:
        if f in handled:
            outcome.fixed.append(f)
            continue
        # Most findings sit on an instruction; a few on a comment line of their own (a misspelt
        # `# envpin: ignore=` comment): the note goes above that line, indented like it.
        ins = by_line.get(f.line)
        text = df.lines[f.line - 1]
        indent = ins.indent if ins is not None else text[: len(text) - len(text.lstrip())]
        comment = f"{indent}# envpin audit: {f.rule}: {f.fix}"
        at = _note_line(df, f.line)
        if comment.strip() in _comments_above(df, f.line) or comment in edits.before.get(at, []):
            outcome.commented.append(f)
            continue
        notes = edits.before.setdefault(at, [])
        if at != f.line:  # above the suppression comment, and above that comment's own notes
            notes.insert(moved.get(at, 0), comment)
            moved[at] = moved.get(at, 0) + 1
        else:
            notes.append(comment)
        outcome.commented.append(f)

    # The byte order mark and CR LF line ends come back as they were: only the lines that change differ.
    outcome.text = ("\ufeff" if df.bom else "") + edits.render(df.lines, "\r\n" if df.crlf else "\n")
    try:
        parse(outcome.text, df.path, build_args)
    except EnvpinError as exc:  # a bug in the fixer, never the user's input
        raise EnvpinError(f"internal error: the fixed {df.path} does not parse: {exc.message}") from exc
    return outcome


def _note_line(df: Dockerfile, line: int) -> int:
    """Where the note for a finding on `line` goes: right above it, or above the `# envpin: ignore=` comment
    that sits right above it, which must stay attached to its instruction (an inline suppression names the
    line below it)."""
    if line >= 2 and df.lines[line - 2].lstrip().startswith("#") and _IGNORE_MARK.search(df.lines[line - 2]):
        return line - 1
    return line


def _comments_above(df: Dockerfile, line: int) -> set[str]:
    found: set[str] = set()
    i = line - 2
    while i >= 0 and df.lines[i].lstrip().startswith("#"):
        found.add(df.lines[i].strip())
        i -= 1
    return found


def _pin_from(edits: _Edits, ins: Instruction, st: Stage, resolve: Callable[[str], str], outcome: FixOutcome) -> None:
    ref = st.image if imageref.split(st.image)[1] else f"{st.image}:latest"
    digest = resolve(ref)
    words = [w for w, _, _ in split_words(ins.args)]
    parts = ["FROM"]
    if ins.flags_text:
        parts.append(ins.flags_text)
    parts.append(f"{ref}@{digest}")
    if len(words) == 3:
        parts.extend(words[1:])
    edits.ranges[ins.line] = (ins.end_line, [ins.indent + " ".join(parts)])
    outcome.actions.append(f"line {ins.line}: FROM {ref} pinned to {digest}")


def _ok(name: str, var: Var | None, want: str) -> bool:
    if var is None or var.value is None:
        return False
    if var.unresolved:
        return True
    value = var.value.strip()
    if name in D9M_VARS:
        return value.lower() in TRUE
    if name == "PYTHONHASHSEED":
        return seed_ok(value)
    return value == want


def _env_block(
    df: Dockerfile,
    stage: Stage,
    env_findings: list[Finding],
    remove_forbidden: bool,
    tf: str | None,
    edits: _Edits,
    outcome: FixOutcome,
) -> None:
    base = identify(df, stage, tf)
    rules = {f.rule for f in env_findings}
    book = recipes.book()
    common = {e.name: e.value for e in book.env if e.value is not None}  # the schema: every env entry has one
    if base.recipe is not None and rules & _D9M_RULES:
        desired = base.recipe.env_dict()
    else:
        wanted = {"PYTHONHASHSEED"} if PYTHONHASHSEED_UNSET.id in rules else set()
        if HOROVOD_FUSION_THRESHOLD.id in rules:
            wanted.add("HOROVOD_FUSION_THRESHOLD")
        source = base.recipe.env_dict() if base.recipe is not None else common
        desired = {k: v for k, v in source.items() if k in wanted}
    if base.recipe is not None:
        title = f"{MARKER}{base.recipe.id} for {base.label} (TensorFlow {base.tf_version})"
    else:
        title = f"{MARKER}settings every TensorFlow version needs (the base's TensorFlow is not known)"
    block = {k: v for k, v in sorted(desired.items()) if not _ok(k, stage.env.get(k), v)}
    forbidden = {u.name for u in book.unset} | {u.name for u in book.no_effect}
    remove = set(block) | (forbidden if remove_forbidden else set())
    chain = df.chain(stage)
    existing = _existing_block(df, stage)
    for st in chain:
        for ins in st.instructions:
            if ins.keyword != "ENV" or (ins is existing and block):
                continue
            gone = [p.key for p in ins.pairs if p.key in remove]
            if gone:
                kept = [p.text for p in ins.pairs if p.key not in remove]
                multiline = ins.line != ins.end_line
                edits.ranges[ins.line] = (ins.end_line, _env_lines(ins.indent, kept, df.escape, multiline))
                outcome.actions.append(f"line {ins.line}: removed {', '.join(gone)} from ENV")
    if not block:
        return
    if existing is not None:
        kept = [p.text for p in existing.pairs if p.key not in remove]
        pairs = kept + [f"{k}={v}" for k, v in block.items()]
        edits.ranges[existing.line] = (existing.end_line, _env_lines(existing.indent, pairs, df.escape, True))
        outcome.actions.append(f"line {existing.line}: set {', '.join(block)} in the recipe ENV block")
        return
    frm = stage.from_
    lines = [frm.indent + title, *_env_lines(frm.indent, [f"{k}={v}" for k, v in block.items()], df.escape, True)]
    edits.after[frm.end_line] = lines
    outcome.actions.append(f"after line {frm.line}: added ENV {' '.join(f'{k}={v}' for k, v in block.items())}")


def _existing_block(df: Dockerfile, stage: Stage) -> Instruction | None:
    """The ENV right after FROM that an earlier --fix wrote (marked by its comment), if any."""
    following = [i for i in stage.instructions if i.line > stage.from_.line]
    if not following or following[0].keyword != "ENV" or following[0].legacy_env:
        return None
    between = df.lines[stage.from_.end_line : following[0].line - 1]
    return following[0] if any(line.strip().startswith(MARKER) for line in between) else None


def _env_lines(indent: str, pairs: list[str], escape: str, multiline: bool) -> list[str]:
    if not pairs:
        return []
    if not multiline or len(pairs) == 1:
        return [f"{indent}ENV {' '.join(pairs)}"]
    head = [f"{indent}ENV {pairs[0]} {escape}"]
    body = [f"{indent}    {p} {escape}" for p in pairs[1:-1]]
    return head + body + [f"{indent}    {pairs[-1]}"]
