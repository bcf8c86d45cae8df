"""The base_image rules (FROM: floating tags, missing digests, unresolved build arguments):
each fires on its bad example and not on its good one, through the real audit."""

from __future__ import annotations

import json
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


def _audit(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    from envpin import api

    path = tmp_path / "Dockerfile"
    path.write_text(text)
    return api.audit_files([path], use_config=False)


def test_a_stock_image_is_a_known_base_with_its_tensorflow() -> None:
    from envpin.audit.base import identify
    from envpin.audit.parser import parse

    df = parse("FROM tensorflow/tensorflow:2.20.0-gpu\n", "Dockerfile")
    info = identify(df, df.stages[-1])
    assert (info.tf_version, info.distribution, info.reason) == ("2.20", "stock", None)
    assert info.recipe is not None and info.recipe.distribution == "stock"


STOCK_BASES = (
    "FROM tensorflow/tensorflow:latest-gpu AS a\nFROM tensorflow/tensorflow:2.20.0-gpu AS b\n"
    "FROM tensorflow/tensorflow:2.9.1-gpu\n"
)


def _hints(findings: list[dict[str, object]]) -> dict[str, list[str]]:
    """Each rule's fixes, from findings as JSON gives them."""
    hints: dict[str, list[str]] = {}
    for f in findings:
        hints.setdefault(str(f["rule"]), []).append(str(f["fix"]))
    return hints


def test_from_hints_name_stock_tags_envpin_knows(tmp_path: Path) -> None:
    """A Python caller reads the commands' parameters as envpin.errors.param names them."""
    hints = _hints([f.to_json() for f in _audit(tmp_path, STOCK_BASES).findings])
    assert any(
        "FROM tensorflow/tensorflow:2.20.0-gpu@sha256:… (TensorFlow 2.20.0; ``stock` of catalog`" in h
        for h in hints["from-latest"]
    )
    nodigest = sorted(hints["from-no-digest"])
    assert any(h.endswith("or let ``stock` of build 2.20.0-gpu` pin it") for h in nodigest)
    assert any(h.endswith("(`fix` of audit)") and "2.9.1-gpu" in h for h in nodigest)


def test_from_hints_name_the_commands_options_on_the_command_line(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "Dockerfile").write_text(STOCK_BASES)
    res = cli("audit", "--no-config", "--format", "json", "Dockerfile", cwd=tmp_path)
    assert res.code == 1, res.stderr
    hints = _hints(json.loads(res.stdout)["findings"])
    assert any(
        "FROM tensorflow/tensorflow:2.20.0-gpu@sha256:… (TensorFlow 2.20.0; `envpin catalog --stock` lists" in h
        for h in hints["from-latest"]
    )
    nodigest = sorted(hints["from-no-digest"])
    assert any(h.endswith("or let `envpin build --stock 2.20.0-gpu` pin it") for h in nodigest)
    assert any(h.endswith("(envpin audit --fix)") and "2.9.1-gpu" in h for h in nodigest)
