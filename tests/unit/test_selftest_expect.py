"""Each battery check's expectation comes from the recipe table's raise and silent lists."""

from __future__ import annotations

from typing import Any

from envpin.knowledge import recipes
from envpin.probe.selftest import expect, verdict_summary
from envpin.probe.selftest.ops import CHECKS

TABLE: dict[str, Any] = {
    "sources": {"s": {"title": "t", "url": "https://example.org/s"}},
    "raises_under_determinism": [
        {
            "op": "Bincount",
            "tf_min": "2.7",
            "tf_max": None,
            "devices": "gpu",
            "checks": ["bincount"],
            "message": "Determinism is not yet supported in GPU implementation of Bincount.",
            "source": "s",
        },
        {
            "op": "random",
            "tf_min": "2.7",
            "tf_max": None,
            "devices": "any",
            "checks": ["random-op-without-seed"],
            "message": "When determinism is enabled, random ops must have a seed specified.",
            "source": "s",
        },
    ],
    "nondeterministic_under_determinism": [
        {
            "op": "ParallelMap",
            "tf_min": "2.1",
            "tf_max": "2.6",
            "devices": "any",
            "checks": ["tf-data-parallel-map-order"],
            "why": "no rewrite before 2.7",
            "source": "s",
        },
    ],
}


def test_gpu_only_entries_apply_on_gpus_and_ranges_are_inclusive() -> None:
    assert expect.expected("bincount", "2.7.0", True, TABLE)["verdict"] == expect.RAISES
    assert expect.expected("bincount", "2.21.0", False, TABLE)["verdict"] == "deterministic"
    assert expect.expected("bincount", "2.6.2", True, TABLE)["verdict"] == "deterministic"
    hit = expect.expected("random-op-without-seed", "2.8", False, TABLE)
    assert hit == {
        "verdict": expect.RAISES,
        "source": "https://example.org/s",
        "why": "When determinism is enabled, random ops must have a seed specified.",
    }
    assert expect.expected("tf-data-parallel-map-order", "2.6.0", False, TABLE)["verdict"] == expect.SILENT
    assert expect.expected("tf-data-parallel-map-order", "2.7.0", False, TABLE)["verdict"] == "deterministic"
    assert expect.expected("matmul", None, False, TABLE)["verdict"] is None


def test_surprise_only_when_the_verdict_contradicts_the_table() -> None:
    def check(verdict: str, want: str | None) -> dict[str, Any]:
        return {"verdict": verdict, "expected": {"verdict": want, "why": "", "source": None}}

    assert expect.surprise(check("deterministic", "deterministic")) is None
    assert expect.surprise(check("deterministic", expect.SILENT)) is None  # may agree by chance in a short run
    assert expect.surprise(check("skipped", expect.RAISES)) is None
    assert expect.surprise(check(expect.RAISES, "deterministic")) == (
        "expected deterministic here, got raises-under-determinism"
    )
    assert expect.surprise(check("NONDETERMINISTIC", "deterministic")) is not None
    assert expect.surprise(check("deterministic", expect.RAISES)) is not None
    assert expect.surprise(check("deterministic", None)) is None


def test_a_listed_nondeterminism_that_never_shows_is_noted_after_enough_comparisons() -> None:
    from envpin.probe.selftest.run import problems

    def check(comparisons: int) -> dict[str, Any]:
        return {
            "name": "bincount",
            "op": "Bincount/DenseBincount",
            "verdict": "deterministic",
            "message": "",
            "comparisons": comparisons,
            "expected": {"verdict": expect.SILENT, "why": "", "source": "https://example.org/bincount"},
        }

    assert expect.surprise(check(expect.SILENT_COMPARISONS - 1)) is None  # a short run proves nothing
    note = expect.surprise(check(expect.SILENT_COMPARISONS))
    assert note == "expected NONDETERMINISTIC here, but 113 comparisons agreed (a miss has a chance under 1 %)"
    late = dict(check(expect.SILENT_COMPARISONS), surprise=note)
    # reported, not failed: a race that does not show on a loaded machine is no evidence against the table
    assert problems({"checks": [late], "golden": {}, "hygiene": []}) == []
    # 0.96 ** 113: the chance that the lowest rate measured (2 of 50 runs) shows in none of them
    assert 0.96**expect.SILENT_COMPARISONS < 0.01 < 0.96 ** (expect.SILENT_COMPARISONS - 2)


def test_a_table_mismatch_in_the_other_direction_fails_too() -> None:
    from envpin.probe.selftest.run import problems

    ran = {
        "name": "timestamp",
        "op": "Timestamp",
        "verdict": "deterministic",
        "message": "",
        "expected": {"verdict": expect.RAISES, "why": "", "source": None},
    }
    ran["surprise"] = expect.surprise(ran)
    assert problems({"checks": [ran], "golden": {}, "hygiene": []}) == [
        "timestamp (Timestamp) contradicts the recipe table: expected raises-under-determinism here, got deterministic"
    ]


def test_the_real_table_names_only_checks_the_battery_has() -> None:
    names = {c.name for c in CHECKS}
    table = recipes.table()
    for key in ("raises_under_determinism", "nondeterministic_under_determinism"):
        for entry in table[key]:
            assert set(entry["checks"]) <= names, entry["op"]
    assert len(CHECKS) >= 60
    for entry in table.get("ngc_overrides", []):
        assert set(entry["checks"]) <= names, entry["op"]


def test_weighted_bincount_on_cpu_is_listed_per_device_in_the_real_table() -> None:
    """The CPU kernel sums per-thread partial bins: nondeterministic on CPU under determinism from TF 2.15, where
    a weighted call runs as DenseBincount (up to 2.14 it runs as UnsortedSegmentSum: deterministic, on a GPU from
    2.7 too); on a GPU DenseBincount raises. A "cpu" entry never applies on a GPU, nor a "gpu" one on the CPU."""
    table = recipes.table()
    cpu = expect.expected("bincount", "2.21.0", False, table)
    assert cpu["verdict"] == expect.SILENT and cpu["source"].endswith("bincount_op.cc")
    assert expect.expected("bincount", "2.21.0", True, table)["verdict"] == expect.RAISES
    assert expect.expected("bincount", "2.15.1", False, table)["verdict"] == expect.SILENT
    assert expect.expected("bincount", "2.12.1", False, table)["verdict"] == "deterministic"
    assert expect.expected("bincount", "2.12.1", True, table)["verdict"] == "deterministic"
    assert expect.expected("matmul", "2.21.0", False, table)["verdict"] == "deterministic"


def test_a_listed_nondeterminism_is_reported_not_failed() -> None:
    from envpin.probe.selftest import run

    listed = {
        "name": "bincount",
        "op": "Bincount",
        "verdict": "NONDETERMINISTIC",
        "message": "differs",
        "expected": {"verdict": expect.SILENT, "why": "", "source": None},
    }
    unlisted = {**listed, "name": "matmul", "op": "MatMul", "expected": {"verdict": "deterministic"}}
    no_table = {**listed, "name": "conv2d-forward", "op": "Conv2D"}
    no_table.pop("expected")
    assert run.problems({"checks": [listed]}) == []
    assert len(run.problems({"checks": [listed, unlisted, no_table]})) == 2
    summary = verdict_summary([listed, unlisted])
    assert "1 nondeterministic as the recipe table lists for this device (bincount)" in summary
    assert "1 NONDETERMINISTIC (matmul)" in summary


def test_keras_platform_and_ngc_narrow_the_real_table() -> None:
    """Unseeded Dropout raises with Keras 2 and is silently nondeterministic with Keras 3 (measured on TF 2.15
    and 2.21); Keras 3.0-3.6 auto-jit raises on GPUs only; the Windows-only segment entry never applies on
    Linux; NGC 20.03+ overrides the stock bilinear-resize entry."""
    table = recipes.table()
    assert expect.expected("keras-dropout-unseeded", "2.15.1", False, table, "2.15.0")["verdict"] == expect.RAISES
    assert expect.expected("keras-dropout-unseeded", "2.21.0", False, table, "3.15.1")["verdict"] == expect.SILENT
    assert expect.expected("keras-dropout-unseeded", "2.21.0", False, table, None)["verdict"] == "deterministic"
    assert expect.expected("keras-dropout-unseeded", "2.6.0", False, table, "2.6.0")["verdict"] == expect.SILENT
    jit = "keras-auto-jit-max-pool"
    assert expect.expected(jit, "2.17.0", True, table, "3.6.0")["verdict"] == expect.RAISES
    assert expect.expected(jit, "2.17.0", True, table, "3.7.0")["verdict"] == "deterministic"
    assert expect.expected(jit, "2.17.0", False, table, "3.6.0")["verdict"] == "deterministic"
    assert expect.expected("xla-max-pool-backprop", "2.21.0", False, table)["verdict"] == expect.RAISES
    seg = "unsorted-segment-sum"
    assert expect.expected(seg, "2.8.0", True, table, platform="win32")["verdict"] == expect.RAISES
    assert expect.expected(seg, "2.8.0", True, table, platform="linux")["verdict"] == "deterministic"
    bil = "resize-bilinear-backprop"
    assert expect.expected(bil, "2.1.0", True, table)["verdict"] == expect.SILENT
    assert expect.expected(bil, "2.1.0", True, table, ngc_release="20.02")["verdict"] == expect.SILENT
    hit = expect.expected(bil, "2.1.0", True, table, ngc_release="20.03")
    assert hit["verdict"] == "deterministic" and hit["why"].startswith("NGC 20.03")
    assert expect.expected("sparse-dense-matmul", "2.6.0", True, table)["verdict"] == expect.RAISES
    assert expect.expected("sparse-dense-matmul", "2.6.0", True, table, ngc_release="21.09")["verdict"] == expect.SILENT
    for name in ("random-uniform-unseeded", "random-generator-nondeterministic-state"):
        assert expect.expected(name, "2.15.1", False, table)["verdict"] == expect.RAISES
        assert expect.expected(name, "2.6.0", False, table)["verdict"] == expect.SILENT
    assert expect.platform_name("win32") == "windows" and expect.platform_name("linux") == "linux"


def test_the_battery_has_at_least_60_checks() -> None:
    assert len(CHECKS) >= 60 and len({c.name for c in CHECKS}) == len(CHECKS)
