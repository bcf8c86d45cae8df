"""The git rules (git clone and the checkouts that pin it):
each fires on its bad example and not on its good one, through the real audit."""

from __future__ import annotations

from pathlib import Path

import pytest

from envpin.audit.rule import Rule
from envpin.audit.rules import git
from tests.unit.test_audit_rules_registry import check_examples


def test_the_family_has_rules() -> None:
    assert git.RULES


@pytest.mark.parametrize("rule", git.RULES, ids=lambda r: r.id)
def test_bad_example_fires_and_good_example_does_not(rule: Rule, tmp_path: Path) -> None:
    check_examples(rule, tmp_path)
