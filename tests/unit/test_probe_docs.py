"""docs/probe.md states the classification rules; they are generated from the code and must stay equal."""

from __future__ import annotations

import re
from pathlib import Path

from envpin.probe import collect, fingerprint_fields
from envpin.probe.fields import rules_table

DOC = Path(__file__).resolve().parents[2] / "docs" / "probe.md"


def test_rules_table_in_docs_matches_code() -> None:
    text = DOC.read_text()
    m = re.search(r"<!-- rules:start -->\n(.*?)<!-- rules:end -->", text, re.S)
    assert m, "docs/probe.md lacks the rules:start/rules:end markers"
    assert m.group(1) == rules_table(), (
        "regenerate the table: python -c 'from envpin.probe.fields import rules_table; print(rules_table())'"
    )


def test_every_fingerprinted_section_is_documented() -> None:
    section = DOC.read_text().split("## The fingerprint", 1)[1].split("## Classification", 1)[0]
    for key in fingerprint_fields(collect()):
        parts = key.split(".")
        head = parts[0] if key.startswith(("packages.distributions", "env.")) else ".".join(parts[:2])
        assert f"`{head}" in section, key
