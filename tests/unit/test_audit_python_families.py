"""The script audit's hazard families (envpin.audit.rules.script_families): each has its edge cases in
tests/unit/test_audit_python_<family>.py, run through envpin.audit.run, the call the CLI makes, so inline
suppressions and --fix are what a user gets. The helpers here are what those modules share."""

from __future__ import annotations

from pathlib import Path

from envpin.audit import AuditRun, Finding, run, target_for
from envpin.audit.rules import script_families
from tests.conftest import REPO


def findings(folder: Path, text: str, tf: str | None = None, image: dict[str, str] | None = None) -> list[Finding]:
    """Every finding, of every severity, for `text` as folder/train.py judged against TensorFlow `tf`; `image`:
    the ENV of the image the script runs in (as a lock or a Dockerfile of the run gives it)."""
    path = folder / "train.py"
    path.write_text(text, encoding="utf-8")
    lock = target_for(tf, "stock", None, "the lock", image) if tf and image is not None else None
    return run([str(path)], fail_on="info", tf=None if lock else tf, lock_target=lock).findings


def seen(folder: Path, text: str, tf: str | None = None, image: dict[str, str] | None = None) -> set[tuple[int, str]]:
    """(line, rule) of each finding."""
    return {(f.line, f.rule) for f in findings(folder, text, tf, image)}


def rules(folder: Path, text: str, tf: str | None = None) -> set[str]:
    return {f.rule for f in findings(folder, text, tf)}


def fix_twice(folder: Path, text: str, tf: str) -> tuple[str, str, AuditRun]:
    """What --fix writes for folder/train.py, what a second --fix of that output writes over it, and the first
    run (its findings: those left in the fixed file)."""
    path = folder / "train.py"
    path.write_text(text, encoding="utf-8")
    first = run([str(path)], fail_on="info", tf=tf, do_fix=True)
    fixed = folder / "train.py.envpin-fixed"
    once = fixed.read_text(encoding="utf-8")
    run([str(fixed)], fail_on="info", tf=tf, do_fix=True, in_place=True)
    return once, fixed.read_text(encoding="utf-8"), first


def test_every_script_family_has_its_edge_case_tests() -> None:
    """A family module of envpin/audit/python/ and its test module go together, and the tests name every rule
    the family defines."""
    for family in script_families():
        name = family.__name__.rsplit(".", 1)[-1]
        tests = REPO / "tests" / "unit" / f"test_audit_python_{name}.py"
        assert tests.is_file(), f"{family.__name__} has no {tests.relative_to(REPO)}"
        text = tests.read_text(encoding="utf-8")
        assert [r.id for r in family.RULES if r.id not in text] == [], tests.name


def test_the_helpers_see_what_the_cli_reports(tmp_path: Path) -> None:
    """findings() applies inline suppressions, as `envpin audit` does, and judges against the given version."""
    text = "import tensorflow as tf\n\ny = tf.math.unsorted_segment_sum(a, b, 2)\n"
    assert seen(tmp_path, text, "2.5") == {(3, "py-op-raises")}
    assert seen(tmp_path, text.replace(")\n", ")  # envpin: ignore=py-op-raises\n"), "2.5") == set()
    assert seen(tmp_path, text) == set()  # no version: nothing the table says per version
