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


#: Replica 0 of a 2-worker MultiWorkerMirroredStrategy run, whose first difference is the all-reduce (the
#: planted op ran on worker 1), and replica 1 of a one-process MirroredStrategy run over 2 CPU devices.
WORKERS_SHAPE = {
    "processes": 2,
    "tasks": [{"type": "worker", "index": 0}, {"type": "worker", "index": 1}],
    "cluster": {"worker": 2},
    "chief": {"type": "worker", "index": 0},
    "replicas": 2,
    "strategy": "CollectiveAllReduceStrategy",
    "devices": ["/job:worker/replica:0/task:0/device:CPU:0"],
}
DEVICES = ["/job:localhost/replica:0/task:0/device:CPU:0", "/job:localhost/replica:0/task:0/device:CPU:1"]
COLLECTIVE = {
    "kind": "graph",
    "graph": "step",
    "op_type": "CollectiveReduceV2",
    "op_name": "CollectiveReduceV2",
    "output_slot": 0,
    "index": 72,
    "unordered": False,
    "difference": {
        "kind": "values",
        "dtype": "float32",
        "shape": [9],
        "elements": 9,
        "bit_equal": 8,
        "max_abs": 7.451e-09,
        "max_rel": 2.817e-07,
    },
}


def _bisect_replica(mode: str) -> dict:
    if mode == "task":
        data = _bisect(COLLECTIVE)
        data["source"] = {"file": "train.py", "line": 54, "function": "step"}
        data["recipe_table"] = []
        data["replica"] = {
            "index": 0,
            "of": 2,
            "mode": "task",
            "task": {"type": "worker", "index": 0},
            "chief": True,
            "device": None,
            "pids": [24188, 24574],
            "other_devices": None,
            "shape": WORKERS_SHAPE,
            "shape_description": "2 processes (worker 0, worker 1), 2 replicas (CollectiveAllReduceStrategy)",
            "note": "CollectiveReduceV2 combines the values of every replica, and nothing compared before it on "
            "this replica differed: the difference came in from another replica (compare --replica 1)",
        }
        return data
    data = _bisect(None)
    data["replica"] = {
        "index": 1,
        "of": 2,
        "mode": "device",
        "task": None,
        "chief": False,
        "device": DEVICES[1],
        "pids": [17349, 17501],
        "other_devices": [1604, 1604],
        "shape": {**WORKERS_SHAPE, "processes": 1, "tasks": [], "cluster": {}, "chief": None, "devices": DEVICES},
        "shape_description": "one process, 2 replicas (MirroredStrategy)",
        "note": None,
    }
    return data


def _study_distributed() -> dict:
    data = _study()
    data["distributed"] = WORKERS_SHAPE
    return data


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
        ("bisect-replica-task.txt", view.show_bisect, _bisect_replica("task")),
        ("bisect-replica-device.txt", view.show_bisect, _bisect_replica("device")),
        ("study-distributed.txt", view.show_study, _study_distributed()),
    ],
)
def test_runs_views(name: str, show, data: dict, update_golden: bool) -> None:  # type: ignore[no-untyped-def]
    out = io.StringIO()
    show(data, Console(file=out, width=120, color_system=None))
    golden = HERE / name
    if update_golden:
        golden.write_text(out.getvalue())
    assert out.getvalue() == golden.read_text(), f"runs/{name} differs (pytest --update-golden)"
