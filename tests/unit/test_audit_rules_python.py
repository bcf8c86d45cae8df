"""The rules for Python training scripts: each fires on its bad example and not on its good one, through the
real audit (the script alone, judged against the TensorFlow its rule names). The edge cases of each family are
in test_audit_python_<family>.py."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from envpin.audit.rule import Rule
from envpin.audit.rules import script_families
from tests.unit.test_audit_rules_registry import check_examples

SCRIPT_RULES = [r for family in script_families() for r in family.RULES]


@pytest.mark.parametrize("family", script_families(), ids=lambda f: f.__name__.rsplit(".", 1)[-1])
def test_each_family_has_rules_for_scripts(family: ModuleType) -> None:
    assert family.RULES and all(r.language == "python" and r.id.startswith("py-") for r in family.RULES)


@pytest.mark.parametrize("rule", SCRIPT_RULES, ids=lambda r: r.id)
def test_bad_example_fires_and_good_example_does_not(rule: Rule, tmp_path: Path) -> None:
    check_examples(rule, tmp_path)
