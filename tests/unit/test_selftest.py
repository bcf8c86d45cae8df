"""The self-test's pure logic: bitwise comparison, verdicts, summary, report shape (no TensorFlow, no NumPy)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import jsonschema
import pytest

from envpin.probe import selftest

SCHEMA = json.loads((Path(selftest.__file__).parent / "selftest.schema.json").read_text())


def out(fmt: str, dtype: str, values: list, shape: list[int] | None = None) -> dict:
    """One packed output, as pack() makes it from a NumPy array, built with struct instead."""
    return {"dtype": dtype, "shape": shape or [len(values)], "data": struct.pack(f"={len(values)}{fmt}", *values)}


def f32(values: list[float]) -> dict:
    return out("f", "float32", values)


# ----------------------------------------------------------------------------------- compare_outputs


def test_identical_outputs_have_no_differences() -> None:
    a = [f32([1.0, 2.5, -3.0]), out("q", "int64", [1, 2, 3])]
    b = [f32([1.0, 2.5, -3.0]), out("q", "int64", [1, 2, 3])]
    assert selftest.compare_outputs(a, b) == {"elements": 6, "differing_elements": 0, "max_abs_diff": None, "notes": []}


def test_float_rounding_difference_is_counted_and_measured() -> None:
    one_ulp_up = struct.unpack("=f", struct.pack("=I", struct.unpack("=I", struct.pack("=f", 1.0))[0] + 1))[0]
    r = selftest.compare_outputs([f32([1.0, 2.0, 3.0])], [f32([one_ulp_up, 2.0, 3.5])])
    assert r["differing_elements"] == 2
    assert r["max_abs_diff"] == pytest.approx(0.5)


def test_comparison_is_bitwise_not_numeric() -> None:
    # -0.0 == 0.0 numerically, but a bitwise comparison must see the sign bit flip.
    r = selftest.compare_outputs([f32([0.0, 1.0])], [f32([-0.0, 1.0])])
    assert r["differing_elements"] == 1
    assert r["max_abs_diff"] == 0.0


def test_nan_payloads_count_but_stay_out_of_max_abs_diff() -> None:
    quiet = struct.unpack("=f", struct.pack("=I", 0x7FC00000))[0]
    other = struct.unpack("=f", struct.pack("=I", 0x7FC00001))[0]
    same = selftest.compare_outputs([f32([quiet])], [f32([quiet])])
    assert same["differing_elements"] == 0
    r = selftest.compare_outputs([f32([quiet, 1.0])], [f32([other, 3.0])])
    assert r["differing_elements"] == 2
    assert r["max_abs_diff"] == 2.0
    assert any("NaN or infinite" in n for n in r["notes"])


def test_shape_change_counts_every_element() -> None:
    r = selftest.compare_outputs([out("q", "int64", [1, 2, 3, 4], [4])], [out("q", "int64", [1, 2, 3, 4], [2, 2])])
    assert r["differing_elements"] == 4
    assert "changed from" in r["notes"][0]


def test_integer_permutation_is_detected() -> None:
    # tf.data ordering checks compare element ids: a reordering is a difference.
    r = selftest.compare_outputs([out("q", "int64", [0, 1, 2, 3])], [out("q", "int64", [1, 0, 2, 3])])
    assert r["differing_elements"] == 2
    assert r["max_abs_diff"] == 1.0


def test_bfloat16_and_complex_are_decoded() -> None:
    bf = {"dtype": "bfloat16", "shape": [2], "data": struct.pack("=2H", 0x3F80, 0x4000)}  # 1.0, 2.0
    bf2 = {"dtype": "bfloat16", "shape": [2], "data": struct.pack("=2H", 0x3F80, 0x4040)}  # 1.0, 3.0
    r = selftest.compare_outputs([bf], [bf2])
    assert (r["differing_elements"], r["max_abs_diff"]) == (1, 1.0)
    c1 = out("f", "complex64", [1.0, 0.0, 2.0, 2.0], [2])
    c2 = out("f", "complex64", [1.0, 0.0, 5.0, 6.0], [2])
    r = selftest.compare_outputs([c1], [c2])
    assert r["differing_elements"] == 1
    assert r["max_abs_diff"] == pytest.approx(5.0)


# ----------------------------------------------------------------------------------- verdicts


@pytest.mark.parametrize(
    ("type_name", "message", "determinism", "verdict"),
    [
        (
            "UnimplementedError",
            "A deterministic GPU implementation of X is not currently available.",
            True,
            "raises-under-determinism",
        ),
        (
            "InvalidArgumentError",
            "When determinism is enabled, random ops must have a seed specified.",
            True,
            "raises-under-determinism",
        ),
        (
            "RuntimeError",
            "Random ops require a seed to be set when determinism is enabled.",
            True,
            "raises-under-determinism",
        ),
        ("RuntimeError", "something else broke", True, "skipped"),
        # A kernel that cannot run this configuration on this device is no determinism verdict.
        (
            "InvalidArgumentError",
            "Current CPU implementations do not yet support dilation rates larger than 1.",
            True,
            "skipped",
        ),
        ("AttributeError", "module 'tensorflow' has no attribute 'raw_ops'", True, "skipped"),
        ("UnimplementedError", "not available", False, "skipped"),
    ],
)
def test_classify_exception(type_name: str, message: str, determinism: bool, verdict: str) -> None:
    got, text = selftest.classify_exception(type_name, message, determinism)
    assert got == verdict
    assert type_name in text


@pytest.mark.parametrize(
    "raised, verdict",
    [
        # No bfloat16 kernel on this device (a CPU without AVX512_BF16 may have Eigen's, a GPU before Ampere none):
        # skipped, with the reason, never a failure.
        (
            RuntimeError(
                "No OpKernel was registered to support Op 'MatMul' used by {{node MatMul}} with these "
                "attrs: [T=DT_BFLOAT16]"
            ),
            "skipped",
        ),
        # A bfloat16 kernel that refuses to run under determinism is what the check is for: not hidden as a skip.
        (
            ValueError("A deterministic GPU implementation of Conv2DBackpropFilter (bfloat16) is not available"),
            "raises-under-determinism",
        ),
    ],
)
def test_a_bf16_check_skips_only_where_no_kernel_runs(raised: Exception, verdict: str) -> None:
    from envpin.probe.selftest import ops_seeds

    def compute() -> None:
        raise raised

    with pytest.raises(Exception) as info:
        ops_seeds._bf16(None, "MatMul", compute)  # type: ignore[arg-type]
    got, text = selftest.classify_exception(type(info.value).__name__, str(info.value), True)
    assert got == verdict, text
    if verdict == "skipped":
        assert "bfloat16 MatMul does not run here: RuntimeError: No OpKernel" in text
    else:
        assert info.value is raised


def test_tf_message_loses_function_node_prefix_and_extra_lines() -> None:
    raw = (
        "{{function_node __wrapped__Bincount_device_/job:localhost/replica:0/task:0/device:GPU:0}} "
        "Determinism is not yet supported in GPU implementation of Bincount. [Op:Bincount]\n\t [[{{node x}}]]"
    )
    assert selftest.clean_tf_message(raw) == (
        "Determinism is not yet supported in GPU implementation of Bincount. [Op:Bincount]"
    )


def test_finish_check_nondeterministic_reports_counts() -> None:
    comps = [
        selftest.compare_outputs([f32([1.0, 2.0])], [f32([1.0, 2.5])]),
        selftest.compare_outputs([f32([1.0, 2.0])], [f32([1.0, 2.0])]),
    ]
    r = selftest.finish_check("bincount", "Bincount", comps, 0.1234, runs=3)
    assert r["verdict"] == "NONDETERMINISTIC"
    assert (r["differing_elements"], r["max_abs_diff"], r["seconds"], r["runs"]) == (1, 0.5, 0.123, 3)
    assert "1 of 2 comparisons differ" in r["message"]


def test_finish_check_raise_names_op_and_keeps_tf_message() -> None:
    r = selftest.finish_check(
        "bincount", "Bincount", [], 0.01, exc=("UnimplementedError", "Determinism is not yet supported for Bincount.")
    )
    assert r["verdict"] == "raises-under-determinism"
    assert r["differing_elements"] is None and r["max_abs_diff"] is None
    assert "Bincount" in r["message"] and "Determinism is not yet supported for Bincount." in r["message"]


def _check(name: str, verdict: str) -> dict:
    return {
        "name": name,
        "op": name,
        "verdict": verdict,
        "differing_elements": 0,
        "max_abs_diff": 0.0,
        "message": "",
        "seconds": 0.0,
    }


def test_summary_reads_like_the_issue_example() -> None:
    checks = [_check(f"op{i}", "deterministic") for i in range(17)]
    checks += [_check("bincount", "raises-under-determinism"), _check("ctc-loss", "skipped")]
    assert selftest.verdict_summary(checks) == "17/19 deterministic, 1 raises under determinism (bincount), 1 skipped"


def test_summary_names_nondeterministic_ops_first() -> None:
    checks = [_check("a", "deterministic"), _check("b", "NONDETERMINISTIC"), _check("c", "raises-under-determinism")]
    assert selftest.verdict_summary(checks) == (
        "1/3 deterministic, 1 NONDETERMINISTIC (b), 1 raises under determinism (c)"
    )


def test_problems_fail_on_nondeterminism_golden_mismatch_and_findings_not_on_raises() -> None:
    result = {
        "checks": [_check("a", "deterministic"), _check("b", "raises-under-determinism")],
        "golden": {"runs_equal": True, "hashes": ["sha256:" + "0" * 64] * 2},
        "hygiene": [{"check": "PYTHONHASHSEED", "status": "ok", "message": "", "fix": ""}],
    }
    assert selftest.problems(result) == []
    result["checks"].append(_check("c", "NONDETERMINISTIC"))
    result["golden"] = {"runs_equal": False, "hashes": ["sha256:" + "0" * 64, "sha256:" + "1" * 64]}
    result["hygiene"].append({"check": "python-random", "status": "finding", "message": "m.", "fix": "f"})
    found = selftest.problems(result)
    assert len(found) == 3
    assert found[0].startswith("c (c) is NONDETERMINISTIC")
    assert "golden training differs" in found[1]
    assert found[2] == "python-random: m. Fix: f"


# ----------------------------------------------------------------------------------- battery definition


def test_battery_covers_every_op_the_issue_lists() -> None:
    names = {c.name for c in selftest.CHECKS}
    wanted = {
        "conv2d-forward",
        "conv2d-backprop-filter",
        "conv2d-backprop-input",
        "bias-add-backprop",
        "max-pool-backprop",
        "avg-pool-backprop",
        "resize-bilinear-backprop",
        "resize-nearest-backprop",
        "matmul",
        "reduce-sum-large",
        "reduce-mean-large",
        "segment-sum",
        "unsorted-segment-sum",
        "gather-gradient",
        "softmax-xent",
        "sparse-softmax-xent",
        "scatter-nd-add",
        "depthwise-conv2d-backprop",
        "fused-batch-norm-backprop",
        "ctc-loss",
        "bincount",
        "sparse-dense-matmul",
        "tf-data-parallel-map-order",
        "tf-data-interleave-order",
    }
    assert wanted <= names
    assert len(names) == len(selftest.CHECKS)  # unique names
    assert not names & {c.name for c in selftest.PLANTED}


def test_planted_checks_only_by_name_and_unknown_names_refused() -> None:
    assert [c.name for c in selftest.select(["planted-urandom-sum"])] == ["planted-urandom-sum"]
    assert all(not c.name.startswith("planted") for c in selftest.select(None))
    with pytest.raises(ValueError, match="unknown check"):
        selftest.select(["no-such-op"])


# ----------------------------------------------------------------------------------- report shape


def _result() -> dict:
    comps = [selftest.compare_outputs([f32([1.0])], [f32([1.0])])]
    checks = [
        selftest.finish_check("matmul", "MatMul", comps, 0.2, runs=2),
        selftest.finish_check(
            "bincount",
            "Bincount",
            [],
            0.1,
            exc=("UnimplementedError", "Determinism is not yet supported in GPU implementation of Bincount."),
        ),
    ]
    return {
        "schema": selftest.SCHEMA,
        "mode": "quick",
        "python": "3.9.2",
        "tf_version": "2.7.4",
        "numpy_version": "1.23.5",
        "eager": True,
        "determinism": {
            "requested": "on",
            "method": "TF_DETERMINISTIC_OPS=1 set before TensorFlow was imported",
            "TF_DETERMINISTIC_OPS": "1",
            "enable_op_determinism": "unavailable",
            "env": {},
        },
        "trials": 1,
        "runs_per_trial": 2,
        "checks": checks,
        "summary": selftest.verdict_summary(checks),
        "golden": {
            "hash": "sha256:" + "a" * 64,
            "hashes": ["sha256:" + "a" * 64] * 2,
            "runs_equal": True,
            "device_class": "cpu:x86-64-v3;intra_op=2;inter_op=2;onednn=off",
            "steps": 40,
            "runs": 2,
        },
        "hygiene": [{"check": "PYTHONHASHSEED", "status": "finding", "message": "unset", "fix": "set it"}],
        "seconds": 3.2,
    }


def test_outcome_says_passed_only_when_something_was_shown() -> None:
    from envpin.probe.selftest.report import outcome

    result = _result()
    assert outcome(result, []).startswith("self-test passed: ")
    assert outcome(result, ["x"]).startswith("self-test FAILED (1 problem): ")
    # Every check skipped (no kernel, no device) and no golden runs compared: nothing was shown to hold.
    result["checks"] = [selftest.finish_check("matmul-bf16", "MatMul", [], 0.0, exc=("Unsupported", "no kernel"))]
    assert result["checks"][0]["verdict"] == "skipped"
    result["golden"] = {"skipped": "no Keras"}
    line = outcome(result, [])
    assert line.startswith("self-test inconclusive (no check could run here") and "passed" not in line
    # The golden runs alone, compared and equal, are something shown.
    result["golden"] = {**_result()["golden"]}
    assert outcome(result, []).startswith("self-test passed: ")


def test_result_validates_against_schema_and_bad_verdict_does_not() -> None:
    result = _result()
    jsonschema.validate(result, SCHEMA)
    jsonschema.validate({"skipped": "TensorFlow cannot be imported: ModuleNotFoundError: x"}, SCHEMA)
    result["checks"][0]["verdict"] = "flaky"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(result, SCHEMA)
    json.dumps(_result(), allow_nan=False)  # JSON-able, no NaN/inf


def test_markdown_has_summary_table_golden_and_hygiene() -> None:
    text = selftest.render_markdown(_result())
    assert "**1/2 deterministic, 1 raises under determinism (bincount)**" in text
    assert "| matmul | MatMul | deterministic | 0 | 0 |" in text
    assert "sha256:" + "a" * 64 in text
    assert "PYTHONHASHSEED: finding: unset Fix: set it" in text
    assert selftest.render_markdown({"skipped": "no TF"}).strip().endswith("Skipped: no TF")


def test_max_abs_diff_none_when_only_nans_differ() -> None:
    nan = float("nan")
    r = selftest.compare_outputs([f32([nan])], [f32([-nan])])  # same value class, sign bit differs
    assert r["differing_elements"] == 1 and r["max_abs_diff"] is None
    check = selftest.finish_check("x", "X", [r], 0.0, runs=2)
    assert check["verdict"] == "NONDETERMINISTIC" and check["max_abs_diff"] is None
    assert "max abs diff n/a" in check["message"]


def test_markdown_section_is_unchanged_by_the_summary_it_draws_from() -> None:
    """The section as it was before the Markdown and the terminal view shared one summary."""
    assert selftest.render_markdown(_result()) == "\n".join(
        [
            "## Determinism self-test",
            "",
            "TensorFlow 2.7.4, determinism: TF_DETERMINISTIC_OPS=1 set before TensorFlow was imported.",
            "",
            "**1/2 deterministic, 1 raises under determinism (bincount)**",
            "",
            "| check | op | verdict | differing | max abs diff | seconds |",
            "|---|---|---|---:|---:|---:|",
            "| matmul | MatMul | deterministic | 0 | 0 | 0.20 |",
            "| bincount | Bincount | raises-under-determinism | - | n/a | 0.10 |",
            "",
            "- **bincount**: no deterministic implementation in this TensorFlow: a model using Bincount fails once "
            "determinism is on. TensorFlow said: UnimplementedError: Determinism is not yet supported in GPU "
            "implementation of Bincount.",
            "",
            "### Golden training hash",
            "",
            "- hash: `sha256:" + "a" * 64 + "`",
            "- device class: `cpu:x86-64-v3;intra_op=2;inter_op=2;onednn=off`",
            "- two fresh runs equal: yes (40 steps)",
            "",
            "### Seed hygiene",
            "",
            "- PYTHONHASHSEED: finding: unset Fix: set it",
            "",
        ]
    )


def _compared() -> dict:
    result = _result()
    result["without_determinism"] = [dict(result["checks"][0], verdict="NONDETERMINISTIC")]
    result["summary_without_determinism"] = selftest.verdict_summary(result["without_determinism"])
    result["checks"][1]["name"] = "bin|count"
    result["errors"] = ["golden training: boom"]
    return result


def test_markdown_table_with_compare_column_is_well_formed() -> None:
    # Header, rule and every row have one cell per column (the header once lost its last separator).
    lines = [ln for ln in selftest.render_markdown(_compared()).splitlines() if ln.startswith("|")]
    header, rule, *rows = lines
    assert header == "| check | op | verdict | differing | max abs diff | seconds | without determinism |"
    assert rule == "|---|---|---|---:|---:|---:|---|"

    def cells(line: str) -> int:
        return len(line.replace("\\|", "").split("|")) - 2

    assert {cells(ln) for ln in lines} == {7}
    assert rows == [
        "| matmul | MatMul | deterministic | 0 | 0 | 0.20 | NONDETERMINISTIC |",
        "| bin\\|count | Bincount | raises-under-determinism | - | n/a | 0.10 | - |",
    ]


def test_summary_is_plain_data_for_every_renderer() -> None:
    s = selftest.summary(_compared())
    json.dumps(s)  # nothing but text, numbers and lists
    assert s["title"] == "TensorFlow 2.7.4: TF_DETERMINISTIC_OPS=1 set before TensorFlow was imported"
    assert s["columns"][-1] == "without determinism" and len(s["rows"]) == 2
    assert s["rows"][1] == {
        "cells": ["bin|count", "Bincount", "raises-under-determinism", "-", "n/a", "0.10", "-"],
        "verdict": "raises-under-determinism",
    }
    assert s["notes"] == [{"check": "bin|count", "message": _compared()["checks"][1]["message"]}]
    assert s["golden"]["hash"] == "sha256:" + "a" * 64 and s["golden"]["runs_equal"] is True
    assert s["lines"] == [
        "bin|count: " + s["notes"][0]["message"],
        "summary: 1/2 deterministic, 1 raises under determinism (bincount)",
        "without determinism: 0/1 deterministic, 1 NONDETERMINISTIC (matmul)",
        "golden hash sha256:" + "a" * 64 + " (equal in two fresh runs, 40 steps) on "
        "cpu:x86-64-v3;intra_op=2;inter_op=2;onednn=off",
        "hygiene PYTHONHASHSEED: finding: unset Fix: set it",
        "error: golden training: boom",
    ]
    skipped = selftest.summary({"skipped": "no TF"})
    assert skipped["skipped"] == "no TF" and skipped["rows"] == [] and skipped["lines"] == ["self-test skipped: no TF"]
    failed = selftest.summary({"golden": {"error": "boom", "steps": 40}})
    assert failed["golden"] == {"text": "golden hash not available: boom", "reason": "boom"}


def _render(result: dict) -> str:
    import io

    from rich.console import Console

    from envpin.views import selftest as view

    buffer = io.StringIO()
    view.show(result, Console(file=buffer, width=200, color_system=None))
    return buffer.getvalue()


def test_terminal_view_shows_the_summary_table_and_lines() -> None:
    result = _compared()
    result["checks"][0]["op"] = "[bold]MatMul"  # text from TensorFlow is never read as markup
    text = _render(result)
    s = selftest.summary(result)
    assert s["title"] in text
    assert "[bold]MatMul" in text and "without determinism" in text and "bin|count" in text
    for line in s["lines"]:
        assert line in text
    assert text.rstrip().endswith("error: golden training: boom")
    assert _render({"skipped": "no TF"}).strip() == "self-test skipped: no TF"
