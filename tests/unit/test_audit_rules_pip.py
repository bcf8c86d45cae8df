"""The pip rules (pip calls and the requirements files they install):
each fires on its bad example and not on its good one, through the real audit."""

from __future__ import annotations

from pathlib import Path

import pytest

from envpin.audit.rule import Rule
from envpin.audit.rules import pip
from tests.unit.test_audit_rules_registry import check_examples


def test_the_family_has_rules() -> None:
    assert pip.RULES


@pytest.mark.parametrize("rule", pip.RULES, ids=lambda r: r.id)
def test_bad_example_fires_and_good_example_does_not(rule: Rule, tmp_path: Path) -> None:
    check_examples(rule, tmp_path)
