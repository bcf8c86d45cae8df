"""The rules for Python training scripts: each fires on its bad example and not on its good one, through the
real audit (the script alone, judged against the TensorFlow its rule names)."""

from __future__ import annotations

from pathlib import Path

import pytest

from envpin.audit.python import rules as python
from envpin.audit.rule import Rule
from tests.unit.test_audit_rules_registry import check_examples


def test_the_family_has_rules() -> None:
    assert python.RULES and all(r.language == "python" and r.id.startswith("py-") for r in python.RULES)


@pytest.mark.parametrize("rule", python.RULES, ids=lambda r: r.id)
def test_bad_example_fires_and_good_example_does_not(rule: Rule, tmp_path: Path) -> None:
    check_examples(rule, tmp_path)
