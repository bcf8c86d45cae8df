"""Seed hygiene across real fresh processes, for the parts that need only the standard library."""

from __future__ import annotations

import os
from pathlib import Path

from envpin.probe import hygiene


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    env.update(extra)
    return env


def _by_check(findings: list[dict]) -> dict[str, dict]:
    return {f["check"]: f for f in findings}


def _script(tmp_path: Path, body: str) -> str:
    path = tmp_path / "train.py"
    path.write_text(body)
    return str(path)


def test_compare_runs_logic_on_recorded_states() -> None:
    base = {"hash": 1, "set_order": ["a", "b"], "PYTHONHASHSEED": "0", "random_start": "s", "random_end": "s"}
    same = hygiene.compare_runs([dict(base), dict(base)], "recipe")
    assert [f["status"] for f in same] == ["ok", "ok", "skipped", "ok"]  # numpy absent -> skipped
    moved = [dict(base, random_end="x1"), dict(base, random_end="x2")]
    assert _by_check(hygiene.compare_runs(moved, "recipe"))["python-random"]["status"] == "finding"
    drawn = [dict(base, numpy_start="n0", numpy_end="n1", numpy_unseeded_generators=1)] * 2
    numpy_entry = _by_check(hygiene.compare_runs(drawn, "script"))["numpy-random"]
    assert numpy_entry["status"] == "finding" and "default_rng() was called without a seed" in numpy_entry["message"]
