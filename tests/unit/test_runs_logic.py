"""envpin bisect/study/cost without TensorFlow, in-process: the statistics, the metrics contract, the source
frame, the recipe table's notes, the verdict words, the figure, the hook's environment, and bad input (exit 2).
What runs a command (the hook, the node program, a study, the renderers) is in tests/cli/test_runs_logic.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from envpin.runs import launch, study
from envpin.runs.bisect import table_notes, user_frame
from envpin.runs.cost import overhead, overhead_ci
from envpin.views import figures
from envpin.views.runs import bisect_lines


def test_std_is_exactly_zero_for_equal_values_and_sample_std_otherwise() -> None:
    assert study.std([0.1 + 0.2] * 5) == 0.0  # a float that a mean/deviation round trip would not keep exact
    assert study.std([1.0, 2.0, 3.0]) == pytest.approx(1.0)
    assert study.ratio([1.0, 1.0], [1.0, 3.0]) == 0.0
    assert study.ratio([1.0, 2.0], [5.0, 5.0]) is None


def test_bootstrap_interval_is_seeded_and_brackets_the_ratio() -> None:
    fixed, varied = [0.50, 0.51, 0.49, 0.50, 0.52], [0.40, 0.55, 0.61, 0.47, 0.52]
    first, again = study.bootstrap_ci(fixed, varied), study.bootstrap_ci(fixed, varied)
    assert first == again and first is not None
    assert first[0] <= study.ratio(fixed, varied) <= first[1]  # type: ignore[operator]
    assert study.bootstrap_ci([1.0], varied) is None


def test_verdict_says_exactly_only_when_every_fixed_run_is_equal() -> None:
    same = study.verdict("loss", [0.3, 0.3, 0.3], [0.2, 0.4, 0.3])
    assert "exactly the same value" in same and "nothing" in same
    spread = study.verdict("loss", [0.3, 0.3000001, 0.3], [0.2, 0.4, 0.3])
    assert "exactly" not in spread and "identical" not in spread and "small part" in spread
    assert "%" in spread and "0%" not in spread.split("spreads ")[1][:3]  # never rounded down to 0 %
    assert "nondeterminism alone" in study.verdict("loss", [0.3, 0.4], [0.5, 0.5])


def test_metrics_line_is_the_last_json_line_with_the_key() -> None:
    out = "\n".join(
        [
            'epoch 1 {"envpin_metrics": not json',
            json.dumps({"envpin_metrics": {"acc": 0.5}}),
            "some log line",
            json.dumps({"envpin_metrics": {"acc": 0.75, "loss": 1, "flag": True, "name": "x"}}),
        ]
    )
    assert launch.metrics_line(out) == {"acc": 0.75, "loss": 1.0}
    assert launch.metrics_line("no metrics here\n") == {}


def test_user_frame_skips_python_tensorflow_keras_and_the_hook() -> None:
    stack = [
        {"file": "/home/u/train.py", "line": 40, "function": "<module>"},
        {"file": "/tmp/envpin-runs-x/hook/sitecustomize.py", "line": 150, "function": "fit"},
        {"file": "/venv/lib/python3.11/site-packages/keras/src/trainer.py", "line": 9, "function": "fit"},
        {"file": "/home/u/model.py", "line": 16, "function": "call"},
        {
            "file": "/venv/lib/python3.11/site-packages/tensorflow/python/ops/bincount_ops.py",
            "line": 183,
            "function": "bincount",
        },
    ]
    assert user_frame(stack) == {"file": "/home/u/model.py", "line": 16, "function": "call"}
    assert user_frame(stack[2:3]) is None


def test_the_recipe_table_speaks_of_weighted_bincount_per_device() -> None:
    cpu = table_notes("DenseBincount", "2.21.0", "/job:localhost/replica:0/task:0/device:CPU:0")
    assert [n["kind"] for n in cpu] == ["nondeterministic"] and "CPU" in cpu[0]["op"]
    gpu = table_notes("DenseBincount", "2.21.0", "/device:GPU:0")
    assert {n["kind"] for n in gpu} == {"raises"} and any("DenseBincount" in n["detail"] for n in gpu)
    assert table_notes("MatMul", "2.21.0", "/device:CPU:0") == []
    # The summary modes of the debugger raise under determinism on a GPU: bisect dumps FULL_TENSOR instead.
    summary = table_notes("DebugNumericSummaryV2", "2.21.0", "/device:GPU:0")
    assert summary and all(n["kind"] == "raises" for n in summary)


def _bisect(first: dict | None, unmatched: int = 0, compared: int = 10) -> dict:
    return {
        "command": ["python", "t.py"],
        "seed": 1,
        "steps": 3,
        "recipe": False,
        "tf_version": "2.21.0",
        "executions": [compared, compared],
        "compared": compared,
        "unmatched": unmatched,
        "identical": first is None and unmatched == 0 and compared > 0,
        "first_difference": first,
        "source": None,
        "recipe_table": [],
    }


def test_bisect_words_never_say_identical_when_not() -> None:
    assert any(line.startswith("bit-identical") for line in bisect_lines(_bisect(None)))
    lines = bisect_lines(_bisect(None, unmatched=3))
    assert not any("bit-identical" in line for line in lines) and any("not identical" in line for line in lines)
    first = {
        "kind": "graph",
        "graph": "g",
        "op_type": "MatMul",
        "op_name": "m",
        "output_slot": 0,
        "index": 4,
        "difference": {
            "kind": "values",
            "dtype": "float32",
            "shape": [2],
            "elements": 2,
            "bit_equal": 1,
            "max_abs": 1e-7,
            "max_rel": 1e-6,
        },
    }
    text = "\n".join(bisect_lines(_bisect(first)))
    assert "identical" not in text and "1 of 2 elements bit-equal" in text and "lists nothing for MatMul" in text


def _study_result() -> dict:
    metric = {
        "metric": "loss <b>",
        "recipe": False,
        "ratio": 0.5,
        "ratio_ci95": [0.2, 0.9],
        "verdict": "v & w",
        "fixed": {"values": [0.3, 0.31, 0.29], "std": 0.01},
        "varied": {"values": [0.2, 0.4, 0.3], "std": 0.1},
    }
    return {
        "command": ["python", "t.py"],
        "runs_per_arm": 3,
        "seed": 42,
        "tf_version": "2.21.0",
        "metrics": [
            metric,
            dict(metric, recipe=True, ratio=0.0, ratio_ci95=[0.0, 0.0], fixed={"values": [0.3] * 3, "std": 0.0}),
        ],
    }


def test_figure_is_self_contained_and_draws_every_run() -> None:
    page = figures.page(_study_result())
    assert page == figures.page(_study_result())  # same runs, same bytes
    assert page.count("<svg") == 2 and page.count('class="run"') == 12
    assert "<script" not in page and "src=" not in page and "href=" not in page and "@import" not in page
    assert "loss &lt;b&gt;" in page and "v &amp; w" in page  # metric names and verdicts are escaped
    import xml.dom.minidom

    for svg in page.split("<svg")[1:]:  # each panel is well-formed XML
        xml.dom.minidom.parseString("<svg" + svg.split("</svg>")[0] + "</svg>")


def test_cost_overhead_and_its_interval() -> None:
    assert overhead([1.0, 1.0], [1.5, 1.5]) == pytest.approx(0.5)
    ci = overhead_ci([1.0, 1.1, 0.9], [1.2, 1.3, 1.25])
    assert ci is not None and ci[0] <= overhead([1.0, 1.1, 0.9], [1.2, 1.3, 1.25]) <= ci[1]


def test_the_child_environment_carries_the_hook_and_the_seed(tmp_path: Path) -> None:
    base = {"PATH": "/bin", "PYTHONPATH": "/user/lib", "ENVPIN_RUNS_DUMP": "/stale", "ENVPIN_SEED": "9"}
    env = launch.environment(launch.RunSpec("a", seed=7, recipe=True), tmp_path / "hook", tmp_path / "out", base)
    assert env["PYTHONPATH"].split(os.pathsep) == [
        str(tmp_path / "hook"),
        str(tmp_path / "hook" / "envpin.pyz"),
        "/user/lib",
    ]
    assert env["ENVPIN_SEED"] == "7" and env["ENVPIN_RUNS_RECIPE"] == "1" and env["PYTHONHASHSEED"] == "0"
    assert "ENVPIN_RUNS_DUMP" not in env  # a stale variable of the caller never reaches the child
    plain = launch.environment(launch.RunSpec("b", seed=None), tmp_path / "hook", tmp_path / "out", base)
    assert "ENVPIN_SEED" not in plain and "ENVPIN_RUNS_RECIPE" not in plain
    assert "ENVPIN_RUNS_COMPARE" not in plain  # only bisect's second run compares as it ends
    second = launch.RunSpec("run 2", seed=42, dump=True, compare='{"dump": "/w/run-000/dump-7"}')
    assert launch.environment(second, tmp_path / "hook", tmp_path / "out", base)["ENVPIN_RUNS_COMPARE"] == (
        '{"dump": "/w/run-000/dump-7"}'
    )


def test_bisect_takes_the_comparison_the_second_run_made_or_says_why_there_is_none() -> None:
    """The second run's record holds the comparison its hook made as it ended (envpin/runs/hook.py): its result
    is taken; one made against another dump, or none (the variable did not reach the run), leaves the comparison
    to the reader program; a failed or unreadable one is one error."""
    from envpin.runs.bisect import _compared

    result = {"executions": [3, 3], "compared": 3, "unmatched": 0, "first_difference": None}
    dump = "/w/run-000/dump-7"
    assert _compared({"comparison": {"dump": dump, "result": result}}, dump) == result
    assert _compared({"comparison": {"dump": "/w/run-000/dump-8", "result": result}}, dump) is None
    assert _compared({}, dump) is None
    with pytest.raises(launch.RunError) as err:
        _compared({"comparison": {"dump": dump, "error": "KeyError: 'graph 1'"}}, dump)
    assert err.value.message == "comparing the dumps failed (at the end of run 2): KeyError: 'graph 1'"
    assert "keep" in str(err.value.hint)
    with pytest.raises(launch.RunError, match="no result envpin can read"):
        _compared({"comparison": {"dump": dump, "result": {"compared": 3}}}, dump)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("bisect",), "Missing argument"),
        (("study", "--", "no-such-program-xyz"), "not found"),
        (("cost", "-r", "1", "--", "true"), "between 2 and 1000"),
        (("study", "-n", "1", "--", "true"), "between 2 and 1000"),
        (("bisect", "--steps", "0", "--", "true"), "--steps"),
    ],
)
def test_bad_input_is_one_error_and_one_hint(cli, args: tuple[str, ...], needle: str) -> None:  # type: ignore[no-untyped-def]
    result = cli(*args)
    lines = result.stderr.strip().splitlines()
    assert result.code == 2 and needle in lines[-2] and lines[-2].startswith("error:")
    assert lines[-1].startswith("hint:") and "Traceback" not in result.stderr


def test_node_records_come_back_whole_or_not_at_all() -> None:
    """The framing of envpin/runs/nodeboot.py as the host reads it: records split into lines, interleaved with
    the command's output; a damaged or incomplete record is left out, never half-read."""
    from envpin.runs import nodeboot

    big = {"pid": 1, "history": {"loss": [i / 7 for i in range(3000)]}, "tf_version": "2.9.1"}
    small = {"pid": 2, "tf_version": "2.9.1", "seed": 4}
    lines_big, lines_small = nodeboot.frame(big), nodeboot.frame(small)
    assert len(lines_big) > 3 and all(len(line) < 700 for line in lines_big)
    mixed = ["epoch 1", *lines_big[:2], '{"envpin_metrics": {"a": 1}}', *lines_small, *lines_big[2:], "done"]
    assert sorted(launch.node_records("\n".join(mixed)), key=lambda r: r["pid"]) == [big, small]
    assert launch.node_records("\n".join(lines_big[:-1] + lines_small)) == [small]  # incomplete: left out
    damaged = [*lines_big[:1], lines_big[1][:-3] + "AAA", *lines_big[2:]]
    assert launch.node_records("\n".join(damaged)) == []
    assert launch.metrics_line("\n".join(mixed)) == {"a": 1.0}


def test_bisect_words_for_runs_with_no_counterpart_at_all() -> None:
    lines = bisect_lines(_bisect(None, unmatched=2, compared=0))
    assert lines[-1].startswith("not identical: no op execution had a counterpart in the other run (2 without one)")
    assert not any("bit-identical" in line or "no compared value differed" in line for line in lines)
