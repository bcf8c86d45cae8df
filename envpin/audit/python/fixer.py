"""`envpin audit --fix` for Python scripts: the safe fixes, and a comment above the statement for the rest.

Safe fixes: the recipe's determinism switch and the global seeding inserted after the script's TensorFlow import
(an environment switch before it), `deterministic=False` removed from a call, `jit_compile=False` added to
Keras 3's `compile()`. Edits are made on the source text at the positions `ast` gives, so every line the fixer
does not touch stays byte for byte; the result must parse, or nothing but comments is written.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from envpin.audit.check import Finding
from envpin.audit.config import _MARK as _IGNORE_MARK
from envpin.audit.fix import FixOutcome
from envpin.audit.python import rules as R
from envpin.audit.python import source_lines
from envpin.audit.python.checks import ScriptTarget, switch_name
from envpin.audit.python.names import canonical
from envpin.errors import EnvpinError
from envpin.record import Value

#: The rules --fix changes the script for (the others get a comment above their statement).
FIXABLE = frozenset(r.id for r in R.RULES if r.fixable)
COMMENT = "# envpin audit: "


@dataclass(slots=True)
class _Edits(Value):
    """Lines inserted above (``before``) and below (``after``) a line, and byte ranges of a line replaced
    (``cuts``: line -> (start, end, new))."""

    before: dict[int, list[str]] = field(default_factory=dict)
    after: dict[int, list[str]] = field(default_factory=dict)
    cuts: dict[int, list[tuple[int, int, str]]] = field(default_factory=dict)

    def render(self, lines: list[str], eol: str) -> str:
        out: list[str] = []
        for n, line in enumerate(lines, 1):
            out += [t + eol for t in self.before.get(n, [])]
            if n in self.cuts:
                body = line.rstrip("\r\n")
                ending = line[len(body) :]
                raw = body.encode("utf-8")
                for start, end, new in sorted(self.cuts[n], reverse=True):
                    raw = raw[:start] + new.encode("utf-8") + raw[end:]
                edited = raw.decode("utf-8")
                if edited.strip() or not body.strip():
                    out.append(edited + ending)
            else:
                out.append(line)
            if self.after.get(n):
                if not line.endswith(("\n", "\r")):
                    out[-1] += eol
                out += [t + eol for t in self.after[n]]
        return "".join(out)


def fix_script(text: str, path: str, findings: list[Finding], target: ScriptTarget) -> FixOutcome:
    """The fixed text and which findings were fixed or commented. `findings` are the script's own, after
    suppressions; the text must parse (the caller stops at a parse-error before fixing)."""
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    text = text[len(bom) :]  # the positions ast gives count from after a BOM; it is put back in front
    tree = ast.parse(text, filename=path)
    lines = source_lines(text, keepends=True)
    first = lines[0] if lines else "\n"
    eol = "\r\n" if first.endswith("\r\n") else ("\r" if first.endswith("\r") else "\n")
    outcome = FixOutcome(bom + text)
    edits = _Edits()
    mine = [f for f in findings if f.file == path]
    comment: list[Finding] = []
    done_insert = False
    for f in mine:
        ok = False
        if f.rule in (R.PY_SWITCH_MISSING.id, R.PY_NO_GLOBAL_SEED.id):
            if not done_insert:
                rules = {g.rule for g in mine}
                ok = done_insert = _insert(
                    tree,
                    lines,
                    edits,
                    target,
                    outcome,
                    switch=R.PY_SWITCH_MISSING.id in rules,
                    seed=R.PY_NO_GLOBAL_SEED.id in rules,
                )
            else:
                ok = True
        elif f.rule == R.PY_DATA_NONDETERMINISTIC.id:
            ok = _remove_nondeterministic(tree, lines, edits, f.line, outcome)
        elif f.rule == R.PY_KERAS3_AUTO_XLA.id:
            ok = _add_jit_false(tree, edits, f.line, outcome)
        elif f.rule == R.PY_UNSEEDED_RANDOM.id and "global generator" in f.message:
            # the inserted global seeding seeds Python's and NumPy's generators too
            ok = done_insert and R.PY_NO_GLOBAL_SEED.id in {g.rule for g in mine}
        (outcome.fixed if ok else comment).append(f)
    # compile(jit_compile=True) that the Keras 3 fix turned into jit_compile=False: its py-jit-compile is fixed too
    turned = {f.line for f in outcome.fixed if f.rule == R.PY_KERAS3_AUTO_XLA.id}
    for f in [
        f
        for f in comment
        if f.rule == R.PY_JIT_COMPILE.id
        and f.line in turned
        and f.message.startswith("jit_compile=True ")
        and _only_compile_jit(tree, f.line)
    ]:
        comment.remove(f)
        outcome.fixed.append(f)
    for f in comment:
        _comment(tree, lines, edits, f)
        outcome.commented.append(f)
    fixed = edits.render(lines, eol)
    try:
        ast.parse(fixed, filename=path)
    except SyntaxError:  # never expected: fall back to comments only, which cannot break the syntax
        edits = _Edits()
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
    outcome.text = bom + fixed
    return outcome


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


def _comment(tree: ast.Module, lines: list[str], edits: _Edits, f: Finding) -> None:
    at, _ = _statement_line(tree, f.line)
    at = min(max(at, 1), max(len(lines), 1))
    source = lines[at - 1] if lines else ""
    indent = source[: len(source) - len(source.lstrip(" \t"))]
    text = f"{indent}{COMMENT}{f.rule}: {' '.join(f.fix.split())}"
    note = _note_line(lines, at)
    if text.strip() in _comments_above(lines, at) or text in edits.before.get(note, []):
        return  # already there (a second --fix adds nothing)
    edits.before.setdefault(note, []).append(text)


def _note_line(lines: list[str], at: int) -> int:
    """Where lines inserted above the statement on `at` go: right above it, or above the `# envpin: ignore=`
    comment right above it, which must stay attached to its statement (it suppresses the line below it)."""
    if at >= 2 and lines[at - 2].lstrip().startswith("#") and _IGNORE_MARK.search(lines[at - 2]):
        return at - 1
    return at


def _comments_above(lines: list[str], at: int) -> set[str]:
    """The comment lines right above line `at` (stripped): the notes an earlier --fix wrote there, however many
    findings the statement had."""
    found: set[str] = set()
    i = at - 2
    while i >= 0 and lines[i].lstrip().startswith("#"):
        found.add(lines[i].strip())
        i -= 1
    return found


def _tf_alias(tree: ast.Module, by: int) -> str | None:
    """The module-level name tensorflow is bound to (import tensorflow as tf) by line `by`, if any: the lines
    inserted there run before a later import would bind it."""
    for node in tree.body:
        if isinstance(node, ast.Import) and node.lineno <= by:
            for a in node.names:
                if a.name == "tensorflow":
                    return a.asname or "tensorflow"
    return None


def _insert(
    tree: ast.Module,
    lines: list[str],
    edits: _Edits,
    target: ScriptTarget,
    outcome: FixOutcome,
    switch: bool,
    seed: bool,
) -> bool:
    """The recipe's switch and the global seeding, right after the script's top-level TensorFlow import (an
    environment switch right before it). False when the recipe is unknown or no top-level import exists."""
    recipe = target.recipe
    if recipe is None or target.tf_version is None:
        return False
    tf_imports = [
        n
        for n in tree.body
        if isinstance(n, (ast.Import, ast.ImportFrom))
        and any(canonical(m).split(".")[0] in ("tf", "keras") for m in _modules(n))
    ]
    if not tf_imports:
        return False
    first = tf_imports[0]
    anchor = max(
        (n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom)) and n.lineno <= first.lineno),
        key=lambda n: n.lineno,
    )
    end = anchor.end_lineno or anchor.lineno
    alias = _tf_alias(tree, end)
    after: list[str] = []
    if alias is None:
        alias = "tensorflow"
        after.append("import tensorflow")
    steps = {s["step"] for s in recipe.steps}
    major = int(target.tf_version.split(".")[0])
    head = f"# envpin audit --fix: TensorFlow {target.tf_version}, recipe {recipe.id}"
    before: list[str] = []
    if switch:
        name = switch_name(recipe)
        if name is None:
            return False
        if "enable_op_determinism" in steps:
            after.append(f"{alias}.config.experimental.enable_op_determinism()")
        else:
            env = sorted(e["name"] for e in recipe.env if "DETERMINISTIC" in e["name"])
            before += [head, "import os", *(f'os.environ["{n}"] = "1"' for n in env)]
        outcome.actions.append(f"inserted the determinism switch ({name})")
    if seed:
        if "keras_set_random_seed" in steps:
            after.append(f"{alias}.keras.utils.set_random_seed(0)")
        else:
            # tf.compat.v1 exists from TF 1.13 (the table's advice for older versions says so)
            old = any(a["id"] == "compat-v1-before-1-13" for a in recipe.advice)
            tf1 = f"{alias}.set_random_seed(0)" if old else f"{alias}.compat.v1.set_random_seed(0)"
            after += [
                "import random",
                "import numpy",
                "random.seed(0)",
                "numpy.random.seed(0)",
                f"{alias}.random.set_seed(0)" if major >= 2 else tf1,
            ]
        outcome.actions.append("inserted the global seeding (seed 0)")
    if after:
        edits.after.setdefault(end, []).extend([head, *after] if not before else after)
    if before:
        edits.before.setdefault(_note_line(lines, first.lineno), []).extend(before)
    return True


def _modules(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    return [node.module] if node.module and not node.level else []


def _calls_at(tree: ast.Module, line: int) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and n.lineno == line]


def _remove_nondeterministic(tree: ast.Module, lines: list[str], edits: _Edits, line: int, outcome: FixOutcome) -> bool:
    """Remove `deterministic=False` (with its comma) from the calls on `line`; False if there is none to remove
    on one physical line (an option assignment or sloppy=True is commented instead)."""
    removed = False
    for call in _calls_at(tree, line):
        for k in call.keywords:
            if k.arg != "deterministic" or not (isinstance(k.value, ast.Constant) and k.value.value is False):
                continue
            if k.lineno != k.end_lineno or k.end_col_offset is None:
                return False
            raw = lines[k.lineno - 1].rstrip("\r\n").encode("utf-8")
            start, end = k.col_offset, k.end_col_offset
            left = raw[:start].rstrip()
            right = raw[end:]
            if left.endswith(b",") and not left.endswith(b"(,"):
                start = len(left) - 1
            elif right.lstrip().startswith(b","):
                end = end + (len(right) - len(right.lstrip())) + 1
                while end < len(raw) and raw[end : end + 1] == b" ":
                    end += 1
            edits.cuts.setdefault(k.lineno, []).append((start, end, ""))
            removed = True
    if removed:
        outcome.actions.append(f"line {line}: removed deterministic=False")
    return removed


def _only_compile_jit(tree: ast.Module, line: int) -> bool:
    """Whether the only jit_compile=True on `line` is a compile() call's (the one the Keras 3 fix turns off)."""
    sites = [
        call
        for call in _calls_at(tree, line)
        for k in call.keywords
        if k.arg in ("jit_compile", "experimental_compile")
        and isinstance(k.value, ast.Constant)
        and k.value.value is True
    ]
    return len(sites) == 1 and isinstance(sites[0].func, ast.Attribute) and sites[0].func.attr == "compile"


def _add_jit_false(tree: ast.Module, edits: _Edits, line: int, outcome: FixOutcome) -> bool:
    for call in _calls_at(tree, line):
        if not (isinstance(call.func, ast.Attribute) and call.func.attr == "compile"):
            continue
        jit = next((k for k in call.keywords if k.arg == "jit_compile"), None)
        if jit is not None:
            v = jit.value
            if v.lineno != v.end_lineno or v.end_col_offset is None:
                return False
            edits.cuts.setdefault(v.lineno, []).append((v.col_offset, v.end_col_offset, "False"))
        else:
            parts: list[ast.AST] = [*call.args, *call.keywords]
            if parts:
                last = max(parts, key=lambda p: (p.end_lineno or 0, p.end_col_offset or 0))
                if last.end_lineno is None or last.end_col_offset is None:
                    return False
                edits.cuts.setdefault(last.end_lineno, []).append(
                    (last.end_col_offset, last.end_col_offset, ", jit_compile=False")
                )
            else:
                if call.end_lineno is None or call.end_col_offset is None:
                    return False
                at = call.end_col_offset - 1
                edits.cuts.setdefault(call.end_lineno, []).append((at, at, "jit_compile=False"))
        outcome.actions.append(f"line {line}: compile(..., jit_compile=False)")
        return True
    return False


__all__ = ["FIXABLE", "fix_script"]
