"""docs/audit.md documents every rule the audit has, with the severity it really has."""

from __future__ import annotations

import re

from envpin.audit import MECHANICAL, RULES
from tests.conftest import REPO

DOC = (REPO / "docs" / "audit.md").read_text(encoding="utf-8")


def test_rule_table_matches_the_rules() -> None:
    rows = dict(re.findall(r"^\| `([a-z0-9-]+)` \| (error|warning|info) \|", DOC, re.M))
    assert rows == {rid: rule.severity for rid, rule in RULES.items()}


def test_fix_column_says_which_rules_are_mechanical() -> None:
    for rid in RULES:
        row = next(line for line in DOC.splitlines() if line.startswith(f"| `{rid}` |"))
        if rid == "parse-error":
            assert row.rstrip(" |").endswith("`--fix` refuses the file"), row
            continue
        assert (row.rstrip(" |").endswith("comment")) is (rid not in MECHANICAL), row
