"""A metric that is nan or inf in a real study (its runs started through the CLI) is reported as such, never
as a spread; the JSON stays JSON and the figure is written (the refusals before any run: tests/unit)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest


def test_nan_metrics_are_reported_as_such_never_as_a_spread(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """`always` is nan in every run, `once` only in the varied run with seed 43, `fine` is a real spread: the
    first two get no ratio and say so; the JSON stays valid JSON (nan as a string); the figure is written."""
    script = tmp_path / "nan.py"
    script.write_text(
        "import json, os, random\nseed = int(os.environ['ENVPIN_SEED'])\nrandom.seed(seed)\n"
        "metrics = {'always': float('nan'), 'once': float('nan') if seed == 43 else 1.0, 'fine': random.random()}\n"
        "print(json.dumps({'envpin_metrics': metrics}))\n"
    )
    html, svg = tmp_path / "study.html", tmp_path / "study.svg"
    result = cli(
        "study",
        "-n",
        "3",
        "--html",
        str(html),
        "--svg",
        str(svg),
        "--format",
        "json",
        "--",
        sys.executable,
        str(script),
    )
    assert result.code == 0, result.stderr
    data = json.loads(result.stdout, parse_constant=lambda c: pytest.fail(f"{c} in the JSON output"))
    by_name = {m["metric"]: m for m in data["metrics"]}
    for name, bad in (("always", 6), ("once", 1)):
        metric = by_name[name]
        assert metric["ratio"] is None and metric["ratio_ci95"] is None and metric["non_finite"] == bad
        assert f"{bad} of 6 runs gave a value that is not a finite number" in metric["verdict"]
        assert "exactly" not in metric["verdict"] and "part of" not in metric["verdict"]
    assert by_name["always"]["fixed"]["values"] == ["nan"] * 3 and by_name["always"]["fixed"]["std"] is None
    assert by_name["fine"]["non_finite"] == 0 and by_name["fine"]["ratio"] == 0.0
    assert "nan" not in svg.read_text() and html.read_text().count("no finite value") == 2
    text = cli("study", "-n", "2", "--", sys.executable, str(script))
    assert text.code == 0 and "not a finite number" in text.stdout and "exactly the same" in text.stdout
