"""The text views of `envpin bisect`, `envpin study` and `envpin cost`, byte for byte (regenerate with pytest
--update-golden), from results shaped as the commands return them."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from envpin.runs.study import MetricStats, StudyResult
from envpin.views import runs as view

HERE = Path(__file__).resolve().parent / "runs"

FIRST = {
    "kind": "graph",
    "graph": "one_step_on_data",
    "op_type": "DenseBincount",
    "op_name": "functional_1/histogram_1/bincount/DenseBincount",
    "output_slot": 0,
    "index": 131,
    "unordered": False,
    "difference": {
        "kind": "values",
        "dtype": "float32",
        "shape": [1024],
        "elements": 1024,
        "bit_equal": 152,
        "max_abs": 1.1444091796875e-05,
        "max_rel": 0.00011718,
    },
}
NOTE = {
    "kind": "nondeterministic",
    "op": "tf.math.bincount with weights on CPU (Bincount/DenseBincount)",
    "devices": "cpu",
    "tf_min": "1.14",
    "tf_max": None,
    "detail": "the rounding differs between runs",
    "source": "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/core/kernels/bincount_op.cc",
}


def _bisect(first: dict | None) -> dict:
    return {
        "command": ["python", "train.py"],
        "seed": 42,
        "steps": 6,
        "recipe": False,
        "tf_version": "2.21.0",
        "executions": [1476, 1476],
        "compared": 132 if first else 1476,
        "unmatched": 0,
        "identical": first is None,
        "first_difference": first,
        "source": {"file": "train.py", "line": 25, "function": "call"} if first else None,
        "recipe_table": [NOTE] if first else [],
    }


def _study() -> dict:
    metrics = [
        MetricStats("test_accuracy", False, [0.79, 0.77, 0.80, 0.78, 0.80], [0.74, 0.83, 0.85, 0.83, 0.84]),
        MetricStats("test_accuracy", True, [0.7285] * 5, [0.77, 0.83, 0.84, 0.86, 0.87]),
    ]
    return StudyResult(
        command=["python", "train.py"], runs=5, seed=42, recipes=[False, True], metrics=metrics, tf_version="2.21.0"
    ).to_dict()


def _cost() -> dict:
    return {
        "command": ["python", "train.py"],
        "repeat": 3,
        "seed": 42,
        "unit": "step",
        "tf_version": "2.21.0",
        "recipe": "stock-2.20-2.21",
        "without_recipe": {"mean": 0.018, "values": [0.021, 0.0177, 0.0151]},
        "with_recipe": {"mean": 0.0393, "values": [0.0386, 0.0394, 0.0401]},
        "overhead": 1.183,
        "overhead_ci95": [0.862, 1.584],
        "run_seconds": {"without_recipe": [6.4, 5.96, 5.99], "with_recipe": [8.65, 10.47, 10.53]},
    }


@pytest.mark.parametrize(
    ("name", "show", "data"),
    [
        ("bisect-differs.txt", view.show_bisect, _bisect(FIRST)),
        ("bisect-identical.txt", view.show_bisect, _bisect(None)),
        ("study.txt", view.show_study, _study()),
        ("cost.txt", view.show_cost, _cost()),
    ],
)
def test_runs_views(name: str, show, data: dict, update_golden: bool) -> None:  # type: ignore[no-untyped-def]
    out = io.StringIO()
    show(data, Console(file=out, width=120, color_system=None))
    golden = HERE / name
    if update_golden:
        golden.write_text(out.getvalue())
    assert out.getvalue() == golden.read_text(), f"runs/{name} differs (pytest --update-golden)"
