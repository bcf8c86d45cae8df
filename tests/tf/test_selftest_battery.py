"""The op battery with real TensorFlow: every check runs, planted nondeterminism is caught every time, an op
that raises under determinism is reported without stopping the battery, and the whole self-test validates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from envpin.portable import versions
from envpin.probe import selftest

SCHEMA = json.loads((Path(selftest.__file__).parent / "selftest.schema.json").read_text())


def _tf(result: dict[str, Any]) -> tuple[int, ...]:
    return versions.parse_version(result["tf_version"]) or (0,)


@pytest.fixture(scope="module")
def battery_on() -> dict[str, Any]:
    result = selftest.run_battery(determinism=True)
    assert "error" not in result and "skipped" not in result, result
    return result


def test_every_check_runs_with_determinism_on(battery_on: dict[str, Any]) -> None:
    names = [c["name"] for c in battery_on["checks"]]
    assert names == [c.name for c in selftest.CHECKS]
    for c in battery_on["checks"]:
        assert c["verdict"] in selftest.VERDICTS
        if c["name"] in ("matmul-bf16", "conv2d-bf16-backprop") and c["verdict"] == "skipped":
            assert "bfloat16" in c["message"], c  # no bfloat16 kernel on this device: said so, not hidden
            continue
        assert c["verdict"] != "skipped", c  # every check can run on this TensorFlow
        assert c["seconds"] >= 0  # rounded to ms: an op that raises at once can take less
        if c["verdict"] == "deterministic":
            assert c["runs"] >= battery_on["trials"] * battery_on["runs_per_trial"]
            assert c["differing_elements"] == 0 and c["max_abs_diff"] == 0.0
        if c["verdict"] == "NONDETERMINISTIC":
            assert c["differing_elements"] > 0
    det = battery_on["determinism"]
    assert det["requested"] == "on" and det["TF_DETERMINISTIC_OPS"] == "1"
    if _tf(battery_on) >= (2, 8):
        assert det["enable_op_determinism"] == "called"
    else:
        assert det["enable_op_determinism"].startswith("unavailable")


def test_unseeded_random_kernel_raises_under_determinism(battery_on: dict[str, Any]) -> None:
    check = next(c for c in battery_on["checks"] if c["name"] == "random-op-without-seed")
    if _tf(battery_on) >= (2, 7):
        assert check["verdict"] == "raises-under-determinism"
        assert "must have a seed" in check["message"]
    else:  # before the check existed the kernel silently draws from OS entropy
        assert check["verdict"] == "NONDETERMINISTIC"


def test_planted_nondeterminism_is_caught_in_20_of_20_trials() -> None:
    # The same child, Trial, Evaluator, run_check and compare_outputs as the real battery; --quick, so each
    # trial is one check run with the battery's smallest number of comparisons.
    result = selftest.run_battery(determinism=True, quick=True, names=["planted-urandom-sum"], rounds=20)
    verdicts = [c["verdict"] for c in result["checks"]]
    assert len(verdicts) == 20
    assert verdicts == ["NONDETERMINISTIC"] * 20
    for c in result["checks"]:
        assert c["differing_elements"] > 0
        assert 0 < c["max_abs_diff"] < 1.0  # pure rounding: the sums are mathematically equal


def test_op_that_raises_is_reported_and_the_battery_goes_on() -> None:
    names = ["planted-raises-under-determinism", "matmul", "random-op-without-seed", "conv2d-forward"]
    on = selftest.run_battery(determinism=True, quick=True, names=names)
    verdicts = {c["name"]: c for c in on["checks"]}
    assert list(verdicts) == names
    planted = verdicts["planted-raises-under-determinism"]
    assert planted["verdict"] == "raises-under-determinism"
    assert "UnimplementedError" in planted["message"]
    assert "A deterministic implementation of PlantedOp is not currently available." in planted["message"]
    assert verdicts["matmul"]["verdict"] == "deterministic"
    assert verdicts["conv2d-forward"]["verdict"] == "deterministic"
    off = {c["name"]: c for c in selftest.run_battery(determinism=False, quick=True, names=names)["checks"]}
    assert off["planted-raises-under-determinism"]["verdict"] == "deterministic"
    assert off["random-op-without-seed"]["verdict"] == "NONDETERMINISTIC"


def test_whole_selftest_with_compare_validates(tmp_path: Path) -> None:
    result = selftest.run_selftest(compare=True, quick=True)
    jsonschema.validate(result, SCHEMA)
    assert "errors" not in result, result["errors"]
    assert result["mode"] == "quick"
    assert [c["name"] for c in result["without_determinism"]] == [c["name"] for c in result["checks"]]
    off = {c["name"]: c["verdict"] for c in result["without_determinism"]}
    assert off["random-op-without-seed"] == "NONDETERMINISTIC"
    assert result["summary"] == selftest.verdict_summary(result["checks"])
    assert result["golden"]["runs_equal"] is True
    assert result["golden"]["hash"].startswith("sha256:")
    assert {h["check"] for h in result["hygiene"]} >= {"PYTHONHASHSEED"}
    md = selftest.render_markdown(result)
    assert result["summary"] in md and result["golden"]["hash"] in md


def test_verdicts_match_the_recipe_tables_expectations(battery_on: dict[str, Any]) -> None:
    """Each check carries what recipes.json says it shows on this TensorFlow and device, and none contradicts
    it: weighted Bincount, whose CPU kernel differs between runs even under enable_op_determinism, is
    listed as nondeterministic on CPU (it was once the false alarm of every healthy CPU host)."""
    assert battery_on["device"] == "cpu"
    for c in battery_on["checks"]:
        assert c["expected"]["verdict"] in ("deterministic", "NONDETERMINISTIC", "raises-under-determinism"), c
    surprises = {c["name"]: c["surprise"] for c in battery_on["checks"] if "surprise" in c}
    assert surprises == {}
    bincount = next(c for c in battery_on["checks"] if c["name"] == "bincount")
    assert bincount["expected"]["verdict"] == "NONDETERMINISTIC" and "bincount_op.cc" in bincount["expected"]["source"]
    raising = {c["name"] for c in battery_on["checks"] if c["verdict"] == "raises-under-determinism"}
    assert raising == {
        c["name"] for c in battery_on["checks"] if c["expected"]["verdict"] == "raises-under-determinism"
    }
    if _tf(battery_on) >= (2, 7):
        assert {
            "random-op-without-seed",
            "timestamp",
            "random-uniform-unseeded",
            "random-generator-nondeterministic-state",
        } <= raising
        stamp = next(c for c in battery_on["checks"] if c["name"] == "timestamp")
        assert "Timestamp cannot be called when determinism is enabled" in stamp["message"]


def test_seed_keras_and_xla_checks_show_what_the_table_says(battery_on: dict[str, Any]) -> None:
    """The checks of unseeded random ops, tf.random.Generator, Keras Dropout, bf16 kernels and XLA/Keras
    MaxPool, against real TensorFlow: a seeded generator or layer repeats itself, an unseeded one is refused
    (TF >= 2.7) or, with Keras 3, silently differs; XLA's MaxPool gradient is refused on the CPU too."""
    by = {c["name"]: c for c in battery_on["checks"]}
    assert by["random-generator-from-seed"]["verdict"] == "deterministic"
    assert by["keras-dropout-seeded"]["verdict"] == "deterministic"
    assert by["keras-auto-jit-max-pool"]["verdict"] == "deterministic"  # CPU-only: Keras never picks XLA here
    keras = battery_on["keras_version"]
    assert keras and battery_on["build"] == "stock"
    unseeded = by["keras-dropout-unseeded"]
    if _tf(battery_on) >= (2, 7) and keras.startswith("2."):
        assert unseeded["verdict"] == "raises-under-determinism" and "seed" in unseeded["message"]
    elif keras.startswith("3."):
        assert unseeded["verdict"] == "NONDETERMINISTIC" and unseeded["expected"]["verdict"] == "NONDETERMINISTIC"
        assert "seed_generator.py" in unseeded["expected"]["source"]
    if _tf(battery_on) >= (2, 8):
        xla = by["xla-max-pool-backprop"]
        assert xla["verdict"] == "raises-under-determinism"
        assert "deterministic XLA implementation" in xla["message"]
    for name in ("matmul-bf16", "conv2d-bf16-backprop"):  # this TensorFlow has bfloat16 CPU kernels
        assert by[name]["verdict"] in ("deterministic", "skipped"), by[name]
        if by[name]["verdict"] == "skipped":
            assert "bfloat16" in by[name]["message"]


def test_random_checks_without_determinism_draw_new_values() -> None:
    names = [
        "random-uniform-unseeded",
        "random-generator-nondeterministic-state",
        "keras-dropout-unseeded",
        "random-generator-from-seed",
        "keras-dropout-seeded",
        "xla-max-pool-backprop",
    ]
    off = {c["name"]: c["verdict"] for c in selftest.run_battery(determinism=False, quick=True, names=names)["checks"]}
    assert off == {
        "random-uniform-unseeded": "NONDETERMINISTIC",
        "random-generator-nondeterministic-state": "NONDETERMINISTIC",
        "keras-dropout-unseeded": "NONDETERMINISTIC",
        "random-generator-from-seed": "deterministic",
        "keras-dropout-seeded": "deterministic",
        "xla-max-pool-backprop": "deterministic",
    }
