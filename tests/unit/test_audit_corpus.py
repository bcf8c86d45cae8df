"""The audit against a corpus of realistic Dockerfiles with hand-made answer keys (exact match)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from envpin.audit import MECHANICAL, audit, fix, parse, read
from envpin.environment.plan import make_plan
from envpin.environment.render import render
from tests.conftest import REPO

CORPUS = REPO / "tests" / "audit_corpus"
CASES = sorted(p.parent.name for p in CORPUS.glob("*/Dockerfile"))
#: Pinning FROM needs a registry; without one --fix leaves a comment (tests/docker covers the digest path).
NEEDS_REGISTRY = frozenset({"from-no-digest", "from-latest"})


def _expected(case: str) -> Counter[tuple[int, str]]:
    keys: Counter[tuple[int, str]] = Counter()
    for raw in (CORPUS / case / "expected.txt").read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            number, rule = line.split()
            keys[(int(number), rule)] += 1
    return keys


def test_corpus_is_big_enough() -> None:
    assert len(CASES) >= 12


@pytest.mark.parametrize("case", CASES)
def test_findings_match_the_answer_key_exactly(case: str) -> None:
    path = CORPUS / case / "Dockerfile"
    got = Counter((f.line, f.rule) for f in audit(read(str(path))))
    want = _expected(case)
    assert {"missing": sorted(want - got), "extra": sorted(got - want)} == {"missing": [], "extra": []}


@pytest.mark.parametrize("case", CASES)
def test_fix_output_parses_and_reaudits_without_mechanical_findings(case: str) -> None:
    df = read(str(CORPUS / case / "Dockerfile"))
    before = audit(df)
    outcome = fix(df, before)
    again = audit(parse(outcome.text, "fixed"))
    left = {f.rule for f in again}
    assert not left & (MECHANICAL - NEEDS_REGISTRY)
    # everything that is not mechanical is still reported, and carries its comment in the file
    for f in before:
        if f.rule not in MECHANICAL:
            assert f.rule in left
            assert f"# envpin audit: {f.rule}: {f.fix}" in outcome.text
    assert fix(parse(outcome.text, "fixed"), again).text == outcome.text  # a second --fix changes nothing


@pytest.mark.parametrize(
    ("ngc", "tf"), [("20.02", "2.1"), ("20.01-tf1-py3", "1.15"), ("21.06", "2.5"), ("22.03", "2.8"), ("23.03", "2.11")]
)
def test_freshly_rendered_dockerfiles_have_no_errors_or_warnings(ngc: str, tf: str, tmp_path: Path) -> None:
    req = tmp_path / "requirements.lock"
    req.write_text("tensorflow-addons==0.16.1 --hash=sha256:" + "1" * 64 + "\n")
    plan = make_plan(ngc=ngc, tf=tf, requirements=req, base_digest="sha256:" + "2" * 64)
    text = render(plan)["Dockerfile"].decode()
    findings = audit(parse(text, "Dockerfile"), tf=tf)
    assert [f for f in findings if f.severity != "info"] == []
