"""What a script family's mechanical fix works on (Fixing): the script's syntax tree and lines, the edits made so
far, its target and the rules of its findings; and the edits themselves, made on the source text at the
positions `ast` gives, so every line no fix touches stays byte for byte.

The families' fixes (FIXES, FOLLOW_UPS, STARTUP; envpin.audit.rules.script_families) write into a Fixing; the
applier (envpin.audit.python.fixer) calls them, comments what they leave, and checks that the result parses.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field

from envpin.audit.check import Finding
from envpin.audit.python.names import canonical
from envpin.audit.python.script import ScriptTarget
from envpin.audit.rule import IGNORE_MARK
from envpin.record import Value

TYPE_CHECKING = False  # typing's, without importing typing
if TYPE_CHECKING:
    from typing import TypeAlias

    from envpin.knowledge.recipes import Recipe

    #: A family's mechanical fix of one finding (FIXES, FOLLOW_UPS): True when it fixed it, else it is commented.
    Fix: TypeAlias = Callable[["Fixing", Finding], bool]
    #: A family's part of the start-up block (STARTUP), for a recipe, its TensorFlow version and the name
    #: tensorflow is bound to in the script: (lines before the first TensorFlow import, lines after it, the action
    #: reported), or None when the family has nothing to insert there (then nothing is inserted).
    Startup: TypeAlias = Callable[[Recipe, str, str], tuple[list[str], list[str], str] | None]


@dataclass(slots=True)
class Edits(Value):
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


@dataclass(slots=True)
class Fixing(Value):
    """One script being fixed. ``lines`` keep their line ends; ``rules`` are those of the script's findings;
    ``fixed`` the findings fixed so far, in order; ``actions`` what was done, for the report. ``startups`` are the
    families' parts of the start-up block by rule (STARTUP), in the registry's order: the switch before the
    seeding."""

    tree: ast.Module
    lines: list[str]
    target: ScriptTarget
    rules: frozenset[str]
    startups: tuple[tuple[str, Startup], ...] = ()
    edits: Edits = field(default_factory=Edits)
    fixed: list[Finding] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    #: Whether the start-up block is in: None before it was tried.
    inserted: bool | None = None

    def calls_at(self, line: int) -> list[ast.Call]:
        """The calls that start on `line`."""
        return [n for n in ast.walk(self.tree) if isinstance(n, ast.Call) and n.lineno == line]

    def startup(self) -> bool:
        """The start-up block, inserted once for every finding it fixes: right after the script's top-level
        TensorFlow import (and the imports before it), the part of each family whose rule the script's findings
        have (STARTUP), under one `# envpin audit --fix:` comment; lines a part needs before TensorFlow is
        imported (an environment switch) go above that import. False, and nothing inserted, when the recipe is
        unknown, the script has no top-level TensorFlow import, or a part has nothing to insert."""
        if self.inserted is None:
            self.inserted = self._insert()
        return self.inserted

    def _insert(self) -> bool:
        recipe, version = self.target.recipe, self.target.tf_version
        if recipe is None or version is None:
            return False
        tree = self.tree
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
        before: list[str] = []
        actions: list[str] = []
        for rule, part in self.startups:
            if rule not in self.rules:
                continue
            lines = part(recipe, version, alias)
            if lines is None:
                return False
            before += lines[0]
            after += lines[1]
            actions.append(lines[2])
        self.actions += actions
        # what wrote the block, in the script itself: the same text whoever called the fix, so a script's fixed
        # text does not depend on the caller
        head = f"# envpin audit --fix: TensorFlow {version}, recipe {recipe.id}"
        if after:
            self.edits.after.setdefault(end, []).extend([head, *after] if not before else after)
        if before:
            self.edits.before.setdefault(note_line(self.lines, first.lineno), []).extend([head, *before])
        return True

    def add_argument(self, call: ast.Call, text: str) -> bool:
        """Add `text` (`name=value`) as the last argument of `call`, right before its closing parenthesis, with a
        comma where one is needed; False (nothing changed) when the call does not end in `)` where ast says."""
        end_line, end_col = call.end_lineno, call.end_col_offset
        if end_line is None or end_col is None:
            return False
        raw = self.lines[end_line - 1].rstrip("\r\n").encode("utf-8")
        if raw[end_col - 1 : end_col] != b")":
            return False
        args: list[ast.expr] = [*call.args, *(k.value for k in call.keywords)]
        if not args:
            insert = text
        else:
            last = max(args, key=lambda a: (a.end_lineno or 0, a.end_col_offset or 0))
            between = self.span(last.end_lineno or end_line, last.end_col_offset or 0, end_line, end_col - 1)
            insert = text if "," in between.split("#", 1)[0] else f", {text}"
        self.edits.cuts.setdefault(end_line, []).append((end_col - 1, end_col - 1, insert))
        return True

    def span(self, line: int, col: int, end_line: int, end_col: int) -> str:
        """The source text from (line, col) to (end_line, end_col): UTF-8 byte columns, as ast gives them."""
        rows = [self.lines[n - 1].rstrip("\r\n").encode("utf-8") for n in range(line, end_line + 1)]
        if len(rows) == 1:
            return rows[0][col:end_col].decode("utf-8", "replace")
        return b"\n".join([rows[0][col:], *rows[1:-1], rows[-1][:end_col]]).decode("utf-8", "replace")


def note_line(lines: list[str], at: int) -> int:
    """Where lines inserted above the statement on `at` go: right above it, or above the `# envpin: ignore=`
    comment right above it, which must stay attached to its statement (it suppresses the line below it)."""
    if at >= 2 and lines[at - 2].lstrip().startswith("#") and IGNORE_MARK.search(lines[at - 2]):
        return at - 1
    return at


def _tf_alias(tree: ast.Module, by: int) -> str | None:
    """The module-level name tensorflow is bound to (import tensorflow as tf) by line `by`, if any: the lines
    inserted there run before a later import would bind it."""
    for node in tree.body:
        if isinstance(node, ast.Import) and node.lineno <= by:
            for a in node.names:
                if a.name == "tensorflow":
                    return a.asname or "tensorflow"
    return None


def _modules(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    return [node.module] if node.module and not node.level else []
