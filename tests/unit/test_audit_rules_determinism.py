"""The determinism rules (the produced image's determinism environment):
each fires on its bad example and not on its good one, through the real audit."""

from __future__ import annotations

from pathlib import Path

import pytest

from envpin.audit.rule import Rule
from envpin.audit.rules import determinism
from tests.unit.test_audit_rules_registry import check_examples


def test_the_family_has_rules() -> None:
    assert determinism.RULES


@pytest.mark.parametrize("rule", determinism.RULES, ids=lambda r: r.id)
def test_bad_example_fires_and_good_example_does_not(rule: Rule, tmp_path: Path) -> None:
    check_examples(rule, tmp_path)


def _keras3_findings(text: str, folder: Path) -> list[tuple[str, str]]:
    from tests.unit.test_audit_rules_registry import run

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "Dockerfile").write_text(text, encoding="utf-8")
    found = run([str(folder / "Dockerfile")], fail_on="info").findings
    return [(f.severity, f.message) for f in found if f.rule == "keras3-auto-xla"]


@pytest.mark.parametrize(
    ("base", "env", "want"),
    [
        ("tensorflow/tensorflow:2.17.0-gpu", "", "warning"),  # TF 2.16-2.19 allow Keras 3.0-3.6
        ("tensorflow/tensorflow:2.19.0-gpu", "", "warning"),
        ("tensorflow/tensorflow:2.20.0-gpu", "", "info"),  # TF 2.20+ require Keras 3.10+: only the compile order
        ("tensorflow/tensorflow:2.15.0-gpu", "", None),  # Keras 2 never defaults to XLA
        ("tensorflow/tensorflow:2.17.0-gpu", "ENV TF_USE_LEGACY_KERAS=1\n", None),
        ("tensorflow/tensorflow:latest-gpu", "", None),  # TensorFlow not known: d9m-unknown-tf says so instead
    ],
)
def test_keras3_auto_xla_where_the_base_reveals_the_tensorflow(
    base: str, env: str, want: str | None, tmp_path: Path
) -> None:
    text = f"FROM {base}@sha256:{'0' * 64}\nENV TF_DETERMINISTIC_OPS=1 PYTHONHASHSEED=0\n{env}"
    found = _keras3_findings(text, tmp_path)
    if want is None:
        assert found == []
    else:
        assert [s for s, _ in found] == [want], found
        assert "TensorFlow 2." in found[0][1]
