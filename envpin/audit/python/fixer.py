"""`envpin audit --fix` for Python scripts: each finding's mechanical fix, which its family holds (FIXES,
FOLLOW_UPS and STARTUP; envpin.audit.rules.script_families), and a comment above the statement for the rest.

Safe fixes: the recipe's determinism switch and the global seeding inserted after the script's TensorFlow import
(an environment switch before it), `deterministic=False` removed from a call, `jit_compile=False` added to
Keras 3's `compile()`. Edits are made on the source text at the positions `ast` gives (envpin.audit.python.edits),
so every line the fixer does not touch stays byte for byte; the result must parse, or nothing but comments is
written.
"""

from __future__ import annotations

import ast

from envpin.audit.check import Finding
from envpin.audit.fix import FixOutcome
from envpin.audit.python import source_lines
from envpin.audit.python.edits import Edits, Fixing, note_line
from envpin.audit.python.script import ScriptTarget
from envpin.audit.rules import script_families
from envpin.errors import EnvpinError

#: The rules --fix changes the script for (the others get a comment above their statement).
FIXABLE = frozenset(r.id for family in script_families() for r in family.RULES if r.fixable)
COMMENT = "# envpin audit: "


def fix_script(text: str, path: str, findings: list[Finding], target: ScriptTarget) -> FixOutcome:
    """The fixed text and which findings were fixed or commented. `findings` are the script's own, after
    suppressions; the text must parse (the caller stops at a parse-error before fixing). Each finding gets its
    family's fix, in the findings' order; then the follow-ups (a fix another rule's fix made) for the findings
    left; the rest are commented."""
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    text = text[len(bom) :]  # the positions ast gives count from after a BOM; it is put back in front
    tree = ast.parse(text, filename=path)
    lines = source_lines(text, keepends=True)
    first = lines[0] if lines else "\n"
    eol = "\r\n" if first.endswith("\r\n") else ("\r" if first.endswith("\r") else "\n")
    families = script_families()
    fixes = {rule: fix for family in families for rule, fix in family.FIXES.items()}
    follow_ups = {rule: fix for family in families for rule, fix in family.FOLLOW_UPS.items()}
    mine = [f for f in findings if f.file == path]
    fixing = Fixing(
        tree,
        lines,
        target,
        frozenset(f.rule for f in mine),
        tuple((rule, part) for family in families for rule, part in family.STARTUP.items()),
    )
    comment: list[Finding] = []
    for f in mine:
        fix = fixes.get(f.rule)
        (fixing.fixed if fix is not None and fix(fixing, f) else comment).append(f)
    for f in [f for f in comment if f.rule in follow_ups and follow_ups[f.rule](fixing, f)]:
        comment.remove(f)
        fixing.fixed.append(f)
    for f in comment:
        _comment(tree, lines, fixing.edits, f)
    fixed = fixing.edits.render(lines, eol)
    try:
        ast.parse(fixed, filename=path)
    except SyntaxError:  # never expected: fall back to comments only, which cannot break the syntax
        edits = Edits()
        for f in mine:
            _comment(tree, lines, edits, f)
        text = edits.render(lines, eol)
        try:
            ast.parse(text, filename=path)
        except SyntaxError as exc:  # a bug here, never the user's script: nothing is written
            raise EnvpinError(
                f"internal error: the fixed {path} does not parse: {exc.msg} (line {exc.lineno})"
            ) from exc
        return FixOutcome(
            bom + text, commented=list(mine), actions=["the mechanical fixes would not parse: only comments were added"]
        )
    return FixOutcome(bom + fixed, fixing.fixed, comment, fixing.actions)


def _statement_line(tree: ast.Module, line: int) -> tuple[int, int]:
    """The first line of the innermost statement holding `line`, and its column (the comment's indent). A
    decorated def or class starts at its first decorator (`@tf.function(jit_compile=True)` is the method's, not
    the enclosing class's)."""
    best: tuple[int, int] | None = None
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt):
            continue
        start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
        if start <= line <= (node.end_lineno or node.lineno) and (best is None or start >= best[0]):
            best = (start, node.col_offset)
    return best if best is not None else (line, 0)


def _comment(tree: ast.Module, lines: list[str], edits: Edits, f: Finding) -> None:
    at, _ = _statement_line(tree, f.line)
    at = min(max(at, 1), max(len(lines), 1))
    source = lines[at - 1] if lines else ""
    indent = source[: len(source) - len(source.lstrip(" \t"))]
    text = f"{indent}{COMMENT}{f.rule}: {' '.join(f.fix.split())}"
    note = note_line(lines, at)
    if text.strip() in _comments_above(lines, at) or text in edits.before.get(note, []):
        return  # already there (a second --fix adds nothing)
    edits.before.setdefault(note, []).append(text)


def _comments_above(lines: list[str], at: int) -> set[str]:
    """The comment lines right above line `at` (stripped): the notes an earlier --fix wrote there, however many
    findings the statement had."""
    found: set[str] = set()
    i = at - 2
    while i >= 0 and lines[i].lstrip().startswith("#"):
        found.add(lines[i].strip())
        i -= 1
    return found


__all__ = ["FIXABLE", "fix_script"]
