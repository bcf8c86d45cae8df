"""The rule registry: every Rule complete and defined once, the registry, --fix and suppressions agreeing with the
rules' own flags, no check naming a rule by string, and no import cycle inside envpin.audit.

`fired()` and `check_examples()` are what the per-family tests (test_audit_rules_<family>.py) run every rule's
examples through: the real audit, as `envpin audit` runs it on a file.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

from envpin.audit import MECHANICAL, Rule, run
from envpin.audit.fix import _ENV_RULES, _FROM_RULES, _REMOVE_RULES
from envpin.audit.rule import SEVERITIES
from envpin.audit.rules import RULES, families
from tests.conftest import REPO

AUDIT = REPO / "envpin" / "audit"
DOC = (REPO / "docs" / "audit.md").read_text(encoding="utf-8")
ALL = [r for family in families() for r in family.RULES]


def fired(text: str, folder: Path, language: str = "dockerfile", tf: str | None = None) -> set[str]:
    """The rules `envpin audit` reports for a Dockerfile of this text (alone in its build context), or for a
    Python script (train.py, judged against `tf`), every severity, after inline suppressions: the public entry
    the CLI calls."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / ("train.py" if language == "python" else "Dockerfile")
    path.write_text(text, encoding="utf-8")
    return {f.rule for f in run([str(path)], fail_on="info", tf=tf).findings}


def check_examples(rule: Rule, tmp_path: Path) -> None:
    """The rule fires on its bad example and not on its good one."""
    bad = fired(rule.bad, tmp_path / "bad", rule.language, rule.example_tf)
    assert rule.id in bad, f"{rule.id} does not fire on its bad example"
    good = fired(rule.good, tmp_path / "good", rule.language, rule.example_tf)
    assert rule.id not in good, f"{rule.id} fires on its good example"


@pytest.mark.parametrize("rule", ALL, ids=lambda r: r.id)
def test_every_field_is_filled_in(rule: Rule) -> None:
    for name in (f.name for f in dataclasses.fields(Rule)):
        value = getattr(rule, name)
        if isinstance(value, str):
            assert value.strip(), f"{rule.id}: {name} is empty"
    assert rule.severity in SEVERITIES
    assert rule.bad != rule.good and rule.bad.endswith("\n") and rule.good.endswith("\n")
    assert rule.references and all(title.strip() and target.strip() for title, target in rule.references)


def test_ids_are_unique_and_the_registry_holds_every_rule_once() -> None:
    ids = [r.id for r in ALL]
    assert len(ids) == len(set(ids))
    assert list(RULES) == ids and all(RULES[r.id] is r for r in ALL)


def test_each_rule_is_a_constant_of_its_family_module() -> None:
    for family in families():
        constants = {v for k, v in vars(family).items() if k.isupper() and isinstance(v, Rule)}
        assert set(family.RULES) == constants, family.__name__


def test_a_rule_is_checked_when_made() -> None:
    with pytest.raises(ValueError, match="severity"):
        ALL[0].replace(severity="fatal")
    with pytest.raises(ValueError, match="lower-case"):
        ALL[0].replace(id="Pip_Unpinned")


def test_fix_handles_exactly_the_fixable_rules() -> None:
    from envpin.audit.python.fixer import FIXABLE

    assert {r.id for r in ALL if r.fixable} == MECHANICAL
    assert {r.id for r in ALL if r.fixable and r.language == "python"} == FIXABLE  # envpin/audit/python/fixer.py
    assert _ENV_RULES | _FROM_RULES | _REMOVE_RULES == MECHANICAL - FIXABLE  # how fix.py handles each of them


def test_only_parse_error_cannot_be_suppressed(tmp_path: Path) -> None:
    assert {r.id for r in ALL if not r.suppressible} == {"parse-error"}
    (tmp_path / "Dockerfile").write_text("# envpin: ignore=parse-error\nFROM\n")
    found = run([str(tmp_path / "Dockerfile")], read_context=False).findings
    # the mark silences nothing: it is reported itself, and the line below it stays a parse-error
    assert [(f.line, f.rule) for f in found] == [(1, "parse-error"), (1, "suppression-unknown"), (2, "parse-error")]


def test_references_point_at_pages_and_sections_that_exist() -> None:
    anchors = {_anchor(h) for h in re.findall(r"^#+ (.+)$", DOC, re.M)}
    for r in ALL:
        for _, target in r.references:
            if target.startswith("#"):
                assert target[1:] in anchors, f"{r.id}: no section {target} in docs/audit.md"
            elif not target.startswith("https://"):
                page = target.split("#", 1)[0]
                assert (REPO / "docs" / page).is_file(), f"{r.id}: docs/{page} does not exist"


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but '-' and '_' dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_checks_name_rules_by_constant_never_by_string() -> None:
    """ctx.add("pip-unpinned", ...) would fail only when the rule fires; a constant fails at import."""
    bad = []
    for path in sorted(AUDIT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
                and node.args[0].value in RULES
            ):
                bad.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert bad == []


def _audit_imports() -> dict[str, set[str]]:
    """envpin.audit's modules and the envpin.audit modules each imports (function-level imports included)."""
    modules = {
        ".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__"): p for p in AUDIT.rglob("*.py")
    }
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("envpin.audit"):
                subs = {f"{node.module}.{a.name}" for a in node.names} & set(modules)
                found |= subs if len(subs) == len(node.names) else subs | {node.module}
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name in modules}
        edges[name] = found - {name}
    return edges


def test_no_import_cycle_inside_envpin_audit() -> None:
    edges = _audit_imports()

    def reaches(start: str) -> set[str]:
        seen: set[str] = set()
        todo = list(edges[start])
        while todo:
            m = todo.pop()
            if m not in seen:
                seen.add(m)
                todo.extend(edges.get(m, ()))
        return seen

    assert [m for m in edges if m in reaches(m)] == []


def test_rule_modules_do_not_import_the_machinery_that_runs_them() -> None:
    edges = _audit_imports()
    runners = {"envpin.audit", "envpin.audit.engine", "envpin.audit.fix", "envpin.audit.config", "envpin.audit.report"}
    rule_modules = {m for m in edges if m.startswith("envpin.audit.rules") or m == "envpin.audit.rule"}
    assert {m: sorted(edges[m] & runners) for m in rule_modules if edges[m] & runners} == {}
    assert edges["envpin.audit.rule"] == set()  # the Rule type is data: it imports nothing of envpin
