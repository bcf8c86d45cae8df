"""The base_image rules (FROM: floating tags, missing digests, unresolved build arguments):
each fires on its bad example and not on its good one, through the real audit."""

from __future__ import annotations

from pathlib import Path

import pytest

from envpin.audit.rule import Rule
from envpin.audit.rules import base_image
from tests.unit.test_audit_rules_registry import check_examples


def test_the_family_has_rules() -> None:
    assert base_image.RULES


@pytest.mark.parametrize("rule", base_image.RULES, ids=lambda r: r.id)
def test_bad_example_fires_and_good_example_does_not(rule: Rule, tmp_path: Path) -> None:
    check_examples(rule, tmp_path)
