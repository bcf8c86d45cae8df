"""The audit of Python training scripts against a corpus with hand-judged answer keys (tests/audit_scripts/):
TF1 sessions, TF2 Keras and custom loops, Keras 3; with and without hazards. Each case is a `train.py`, written
for the corpus after the pattern of a public training script (its `origin.txt` names it), and `expected.txt`:
`# tf: X.Y` (the TensorFlow it is judged against) and `LINE RULE` per finding a reviewer should get.

Scored by rule id and line over the whole corpus: recall at least 90 % and at most one false alarm per ten
scripts (the figures are printed, and recorded in docs/audit.md); the distributed cases (tf.distribute) exactly:
every finding of their key and no other. --fix keeps every untouched line, parses, and
a second --fix changes nothing."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest

from envpin.audit import run
from envpin.audit.python.fixer import FIXABLE
from tests.conftest import REPO

CORPUS = REPO / "tests" / "audit_scripts"
CASES = sorted(p.parent.name for p in CORPUS.glob("*/train.py"))


def _key(case: str) -> tuple[str, Counter[tuple[int, str]]]:
    tf, keys = "", Counter[tuple[int, str]]()
    for raw in (CORPUS / case / "expected.txt").read_text().splitlines():
        if raw.startswith("# tf:"):
            tf = raw.split(":", 1)[1].strip()
        line = raw.split("#", 1)[0].strip()
        if line:
            number, rule = line.split()
            keys[(int(number), rule)] += 1
    assert tf, f"{case}: expected.txt names no '# tf: X.Y'"
    return tf, keys


def _found(case: str, tf: str) -> Counter[tuple[int, str]]:
    path = CORPUS / case / "train.py"
    return Counter((f.line, f.rule) for f in run([str(path)], tf=tf, fail_on="info").findings)


def score() -> tuple[int, int, int, dict[str, dict[str, list[tuple[int, str]]]]]:
    """(expected, found of those, false alarms, per-case misses and extras)."""
    want_all = hit = extra = 0
    detail: dict[str, dict[str, list[tuple[int, str]]]] = {}
    for case in CASES:
        tf, want = _key(case)
        got = _found(case, tf)
        want_all += sum(want.values())
        hit += sum((want & got).values())
        extra += sum((got - want).values())
        if want != got:
            detail[case] = {"missing": sorted(want - got), "extra": sorted(got - want)}
    return want_all, hit, extra, detail


def test_corpus_has_every_era_and_clean_scripts() -> None:
    assert len(CASES) >= 12
    eras = {_key(c)[0].split(".")[0] + ("k3" if _key(c)[0] >= "2.16" else "") for c in CASES}
    assert {"1", "2", "2k3"} <= eras
    assert sum(1 for c in CASES if not _key(c)[1]) >= 3  # scripts a reviewer finds nothing in
    for case in CASES:
        assert (CORPUS / case / "origin.txt").is_file(), case


def test_recall_and_false_alarms_meet_the_targets(capsys: pytest.CaptureFixture[str]) -> None:
    want, hit, extra, detail = score()
    recall = hit / want
    with capsys.disabled():
        print(
            f"\naudit corpus: {len(CASES)} scripts, {want} expected findings, {hit} found "
            f"(recall {recall:.1%}), {extra} false alarm(s) ({extra / len(CASES) * 10:.2f} per ten scripts)"
        )
        for case, d in detail.items():
            print(f"  {case}: {d}")
    assert recall >= 0.90, detail
    assert extra <= len(CASES) / 10, detail


#: The cases of distributed training (tf.distribute): their key must be met exactly, every finding and no other.
DISTRIBUTED = [c for c in CASES if "tf.distribute." in (CORPUS / c / "train.py").read_text(encoding="utf-8")]


def test_distributed_cases_score_everything_and_no_false_alarm() -> None:
    assert len(DISTRIBUTED) >= 6
    assert sum(1 for c in DISTRIBUTED if not _key(c)[1]) >= 1  # one a reviewer finds nothing in
    for case in DISTRIBUTED:
        tf, want = _key(case)
        got = _found(case, tf)
        assert got == want, {"case": case, "missing": sorted(want - got), "extra": sorted(got - want)}
        assert "github.com/" in (CORPUS / case / "origin.txt").read_text(encoding="utf-8")


@pytest.mark.parametrize("case", CASES)
def test_fix_keeps_untouched_lines_parses_and_is_idempotent(case: str, tmp_path: Path) -> None:
    tf, _ = _key(case)
    src = tmp_path / "train.py"
    text = (CORPUS / case / "train.py").read_text(encoding="utf-8")
    src.write_text(text, encoding="utf-8")
    res = run([str(src)], tf=tf, fail_on="info", do_fix=True)
    fixed = Path(res.files[0]).read_text(encoding="utf-8")
    ast.parse(fixed)
    assert not {f.rule for f in res.findings} & (
        FIXABLE - {"py-determinism-switch-missing", "py-no-global-seed"}
    ) or case in (
        "tf24-data-pipeline",
        "tf212-official-strategy-flags",
    )  # an options assignment is commented, not fixed; so is an AUTO that a function of the script returns
    # the lines a fix may change: those that hold the removed keyword, the compile() call given jit_compile, the
    # strategy given its implementation, the shuffle given its seed
    edited = {n for n, line in enumerate(text.splitlines(), 1) if "deterministic=False" in line}
    changed = {"py-keras3-auto-xla", "py-dist-mwms-communication", "py-dist-unseeded-shuffle"}
    edited |= {f.line for d in res.fixed for f in d.outcome.fixed if f.rule in changed}
    kept = iter(fixed.splitlines(keepends=True))
    for n, line in enumerate(text.splitlines(keepends=True), 1):
        if n in edited:
            continue
        assert any(line == other for other in kept), f"line {n} changed or lost: {line!r}"
    again = tmp_path / "again.py"
    again.write_text(fixed, encoding="utf-8")
    res2 = run([str(again)], tf=tf, fail_on="info", do_fix=True)
    assert Path(res2.files[0]).read_text(encoding="utf-8") == fixed
