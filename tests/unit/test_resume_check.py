"""envpin resume-check without running anything: the verdict from the hook's resume records (restored, not
restored, not seen, nondeterministic, not resumed), the lines that name what was not restored with its
advice and sources, the progress over two calls of run_all, and bad input (exit 2, one error and one hint
line, no run made). The runs themselves: tests/cli/test_resume_check.py (stand-in), tests/tf/test_resume_tf.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from envpin import api
from envpin.errors import UsageError
from envpin.record import ProgressEvent
from envpin.runs import resume
from envpin.views.runs import resume_lines
from tests.unit.test_runs_failures import MARK_COMMAND

STATE = {key: f"{key}-a" for key, *_ in resume.COMPONENTS} | {"generators": None, "steps": 3}


def _records(resumed_point: dict, resumed_end: dict | None = None, again: dict | None = None) -> tuple:  # type: ignore[type-arg]
    end = dict(STATE, weights="end-a")
    uninterrupted = {"point": STATE, "end": end}
    interrupted = {"point": again or STATE, "end": None, "interrupted": True}
    return uninterrupted, interrupted, {"point": resumed_point, "end": resumed_end or end}


def test_a_resume_that_restores_everything_seen_is_identical() -> None:
    verdict, started, components, end, metrics = resume.compare(*_records(dict(STATE)), ({"loss": 0.5}, {"loss": 0.5}))
    assert (verdict, started, end, metrics) == ("identical", 3, [], [])
    status = {c.key: c.status for c in components}
    assert status["generators"] == "not seen" and status["iterator"] == "restored"
    assert all(not c.advice for c in components)


def test_an_iterator_not_restored_is_named_with_its_advice_and_sources() -> None:
    point = dict(STATE, iterator="fresh")
    result = resume.compare(*_records(point, dict(STATE, weights="end-r")), ({"loss": 0.5}, {"loss": 0.7}))
    verdict, _, components, end, metrics = result
    assert verdict == "differs" and end == ["weights"] and metrics == ["loss"]
    [missing] = [c for c in components if c.status == "not restored"]
    assert missing.key == "iterator" and "tf.train.Checkpoint(iterator=iterator)" in missing.advice
    assert any("CheckpointInputPipelineHook" in s for s in missing.sources)
    data = resume.ResumeResult(
        command=["python", "train.py"],
        seed=42,
        steps=3,
        tf_version="2.21.0",
        verdict=verdict,
        resumed_from=3,
        components=components,
        end_differs=end,
        metrics_differ=metrics,
    ).to_dict()
    assert data["not_restored"] == ["iterator"] and data["identical"] is False
    lines = resume_lines(data)
    assert lines[1] == "differs: the resumed run did not end as the uninterrupted one did (model weights; metric loss)"
    assert lines[2] == "  not restored at step 3: the tf.data iterator (its position and shuffle buffer)"
    assert any(line.startswith("the tf.data iterator") and "tensorflow.org" in line for line in lines)


def test_a_run_that_started_over_is_not_resumed_even_when_it_ends_the_same() -> None:
    point = dict(STATE, steps=0, weights="initial")
    verdict, started, *_ = resume.compare(*_records(point))
    assert (verdict, started) == ("not resumed", 0)
    data = {"command": ["x"], "seed": 1, "steps": 3, "tf_version": None, "verdict": verdict, "resumed_from": 0}
    assert "started from step 0, not 3" in resume_lines(data | {"components": [], "end_differs": []})[1]


def test_runs_that_differ_before_the_interruption_say_nondeterministic_not_resume() -> None:
    verdict, _, components, *_ = resume.compare(*_records(dict(STATE), again=dict(STATE, weights="other")))
    assert verdict == "nondeterministic"
    assert [c.key for c in components if c.status == "nondeterministic"] == ["weights"]


def test_progress_counts_the_three_runs_over_two_calls() -> None:
    heard: list[ProgressEvent] = []
    shifted = resume._offset(heard.append, 2, 3)
    assert shifted is not None and resume._offset(None, 2, 3) is None
    shifted(ProgressEvent("runs", completed=1, total=1, unit="runs"))
    assert (heard[0].completed, heard[0].total, heard[0].unit) == (3, 3, "runs")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--steps", "0"), "--steps must be 1 or more, not 0"),
        (("-k", "-2"), "--steps must be 1 or more, not -2"),
        (("--timeout", "0"), "--timeout must be a finite number of seconds above 0"),
        (("--seed", "-1"), "--seed must be between 0 and 4294967295"),
    ],
)
def test_bad_input_is_refused_before_any_run(cli, tmp_path: Path, args: tuple[str, ...], needle: str) -> None:  # type: ignore[no-untyped-def]
    mark, keep = tmp_path / "mark", tmp_path / "keep"
    result = cli("resume-check", *args, "--keep", str(keep), "--", *MARK_COMMAND, str(mark))
    lines = result.stderr.strip().splitlines()
    assert result.code == 2 and len(lines) == 2, result.stderr
    assert lines[0].startswith(f"error: {needle}") and lines[1].startswith("hint:")
    assert not mark.exists() and not keep.exists()


def test_no_command_and_the_api_name_their_parameters(cli) -> None:  # type: ignore[no-untyped-def]
    result = cli("resume-check")
    assert result.code == 2 and result.stderr.splitlines()[0] == "error: Missing argument 'COMMAND...'."
    with pytest.raises(UsageError) as info:
        api.resume_check(["true"], steps=0)
    assert info.value.message == "`steps` must be 1 or more, not 0"
