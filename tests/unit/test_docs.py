"""The README's generated tables match the data (refresh with --update-golden)."""

from __future__ import annotations

from tests.conftest import REPO, load_script

docs = load_script("gendocs")


def test_readme_tables_are_current(update_golden: bool) -> None:
    readme = REPO / "README.md"
    text = readme.read_text()
    fresh = docs.refresh(text)
    if update_golden:
        readme.write_text(fresh)
    assert fresh == readme.read_text(), "README tables are stale: pytest tests/unit/test_docs.py --update-golden"
    for name in docs.BLOCKS:
        assert f"<!-- envpin:{name} -->" in text


def test_audit_rule_reference_is_current(update_golden: bool) -> None:
    """docs/audit.md has a section per rule, generated from the rule table (SARIF's helpUri targets)."""
    path = REPO / "docs" / "audit.md"
    text = path.read_text()
    fresh = docs.refresh(text, docs.AUDIT_BLOCKS)
    if update_golden:
        path.write_text(fresh)
    stale = "docs/audit.md rule sections are stale: pytest tests/unit/test_docs.py --update-golden"
    assert fresh == path.read_text(), stale
    from envpin.audit import RULES

    for rid in RULES:
        assert f"\n### {rid}\n" in fresh


def test_committed_environment_folders_are_current() -> None:
    """images/ holds rendered environments; each must match what envpin renders today."""
    from envpin.api import check_lock

    locks = sorted((REPO / "images").glob("*/envpin.lock"))
    assert locks, "images/ should hold at least one rendered environment"
    for lock in locks:
        assert check_lock(lock) == [], f"{lock.parent} is stale: envpin render --force with its inputs"
