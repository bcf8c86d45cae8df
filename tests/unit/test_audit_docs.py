"""docs/audit.md documents every rule the audit has, with the severity, --fix and suppression it really has
(the page is generated from the Rule constants; this reads what a user reads)."""

from __future__ import annotations

import re

from envpin.audit import RULES
from tests.conftest import REPO

DOC = (REPO / "docs" / "audit.md").read_text(encoding="utf-8")


def _section(rid: str) -> str:
    return DOC.split(f"\n### {rid}\n", 1)[1].split("\n### ", 1)[0].split("\n## ", 1)[0]


def test_the_index_lists_every_rule_with_its_severity_and_flags() -> None:
    rows = re.findall(r"^\| \[`([a-z0-9-]+)`\]\(#\1\) \| (error|warning|info) \| .+ \| (yes|no) \| (yes|no) \|$",
                      DOC, re.M)
    assert {rid: (sev, fix, sup) for rid, sev, fix, sup in rows} == {
        rid: (r.severity, "yes" if r.fixable else "no", "yes" if r.suppressible else "no")
        for rid, r in RULES.items()}


def test_each_rule_has_a_section_with_its_facts_and_examples() -> None:
    for rid, r in RULES.items():
        section = _section(rid)
        assert section.startswith(f"\n**{r.severity}**: {r.title}."), rid
        fence = f"```{r.language}\n"
        assert f"{fence}{r.bad}```" in section and f"{fence}{r.good}```" in section, rid
        assert r.why in section and r.finds in section, rid
        if r.suppressible:
            assert f"`# envpin: ignore={rid}`" in section, rid
        else:
            assert "Cannot be suppressed" in section, rid


def test_the_hand_written_table_is_gone() -> None:
    """The rule facts live in the Rule constants only: no second table to drift from them."""
    assert "| rule | severity | hazard |" not in DOC
    assert DOC.count("<!-- envpin:audit-rule-index -->") == 1 and DOC.count("<!-- envpin:audit-rules -->") == 1


def test_adding_a_rule_is_explained() -> None:
    guide = DOC.split("\n## Adding a rule\n", 1)[1].split("\n## ", 1)[0]
    for needed in ("envpin/audit/rules/", "ctx.add(", "RULES", "python scripts/gendocs.py", "test_audit_rules_"):
        assert needed in guide
