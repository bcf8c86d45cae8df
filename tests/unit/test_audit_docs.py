"""docs/audit.md documents every rule the audit has, with the severity, --fix and suppression it really has
(the page is generated from the Rule constants; this reads what a user reads)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from envpin.audit import RULES
from tests.conftest import REPO, Result

#: The `cli` fixture: envpin.cli.main run in-process on these arguments.
Cli = Callable[..., Result]

DOC = (REPO / "docs" / "audit.md").read_text(encoding="utf-8")


def _section(rid: str) -> str:
    return DOC.split(f"\n### {rid}\n", 1)[1].split("\n### ", 1)[0].split("\n## ", 1)[0]


def test_the_index_lists_every_rule_with_its_severity_and_flags() -> None:
    rows = re.findall(
        r"^\| \[`([a-z0-9-]+)`\]\(#\1\) \| (error|warning|info) \| .+ \| (yes|no) \| (yes|no) \|$", DOC, re.M
    )
    assert {rid: (sev, fix, sup) for rid, sev, fix, sup in rows} == {
        rid: (r.severity, "yes" if r.fixable else "no", "yes" if r.suppressible else "no") for rid, r in RULES.items()
    }


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


def test_the_script_finding_shown_in_the_readme_and_here_is_what_the_audit_prints(cli: Cli, tmp_path: Path) -> None:
    """The example line (`envpin audit Dockerfile train.py` on a 21.06 base, the call on line 7) is the CLI's
    own output, not an older wording of it."""
    (tmp_path / "Dockerfile").write_text(
        "FROM nvcr.io/nvidia/tensorflow:21.06-tf2-py3@sha256:"
        + "cd" * 32
        + "\nENV TF_DETERMINISTIC_OPS=1 PYTHONHASHSEED=0\n"
    )
    (tmp_path / "train.py").write_text(
        "import tensorflow as tf\n\ntf.random.set_seed(42)\nids = tf.constant([0, 0, 1])"
        "\n\n\ny = tf.math.unsorted_segment_sum(tf.ones(3), ids, num_segments=2)\n"
    )
    res = cli("audit", "--no-config", "Dockerfile", "train.py", cwd=tmp_path)
    [printed] = [line for line in res.stdout.splitlines() if line.startswith("train.py:7 py-op-raises error:")]
    for text in (DOC, (REPO / "README.md").read_text(encoding="utf-8")):
        shown = [line for line in text.splitlines() if line.startswith("train.py:7 py-op-raises error:")]
        assert shown == [printed]
