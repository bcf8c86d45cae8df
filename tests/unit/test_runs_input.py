"""envpin bisect/study/cost refuse bad input before any run starts, through the CLI in-process and through
envpin.api (one error line, one hint line, exit 2, nothing written; the api names its parameters, the CLI
their options), and a metric that is nan or inf is reported as such, never as a spread (the study that
writes such a figure runs in tests/cli/test_runs_input.py)."""

from __future__ import annotations

import io
import math
import os
from pathlib import Path

import pytest

from envpin import api
from envpin.errors import UsageError
from envpin.runs import launch, study
from tests.unit.test_runs_failures import MARK_COMMAND


def _refused(result, needle: str, option: str) -> None:  # type: ignore[no-untyped-def]
    lines = result.stderr.strip().splitlines()
    assert result.code == 2, result.stderr
    assert len(lines) == 2 and lines[0].startswith("error:") and lines[1].startswith("hint:"), result.stderr
    assert needle in lines[0] and option in lines[0] and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("args", "option", "needle"),
    [
        (("bisect", "--max-ops", "0"), "--max-ops", "1 or more"),
        (("bisect", "--max-ops", "-5"), "--max-ops", "1 or more"),
        (("bisect", "--steps", "0"), "--steps", "1 or more"),
        (("bisect", "--timeout", "0"), "--timeout", "finite number of seconds above 0"),
        (("bisect", "--timeout", "-1"), "--timeout", "above 0"),
        (("bisect", "--timeout", "nan"), "--timeout", "not nan"),
        (("study", "--timeout", "inf"), "--timeout", "not inf"),
        (("cost", "--timeout", "0"), "--timeout", "above 0"),
        (("bisect", "--op-regex", "("), "--op-regex", "not a valid regular expression"),
        (("bisect", "--replica", "-1"), "--replica", "must be 0 or more, not -1"),
        (("bisect", "--replica", "one"), "--replica", "is not a valid int"),
        (("bisect", "--replica", "1.5"), "--replica", "is not a valid int"),
        (("study", "-n", "1"), "--runs", "between 2 and 1000"),
        (("study", "-n", "100000000"), "--runs", "between 2 and 1000"),
        (("study", "-n", "3", "-j", "0"), "--jobs", "between 1 and 1000"),
        (("study", "-n", "3", "-j", "1001"), "--jobs", "between 1 and 1000"),
        (("cost", "-r", "1"), "--repeat", "between 2 and 1000"),
        (("cost", "-r", "1001"), "--repeat", "between 2 and 1000"),
    ],
)
def test_bad_counts_and_options_are_refused_before_any_run(
    cli,
    tmp_path: Path,
    args: tuple[str, ...],  # type: ignore[no-untyped-def]
    option: str,
    needle: str,
) -> None:
    mark, keep = tmp_path / "mark", tmp_path / "keep"
    result = cli(*args, "--keep", str(keep), "--", *MARK_COMMAND, str(mark))
    _refused(result, needle, option)
    assert not mark.exists() and not keep.exists()


def test_reader_python_that_is_a_fifo_is_named_for_what_it_is(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    fifo, mark = tmp_path / "python", tmp_path / "mark"
    os.mkfifo(fifo)
    os.chmod(fifo, 0o755)
    result = cli("bisect", "--reader-python", str(fifo), "--", *MARK_COMMAND, str(mark))
    _refused(result, "is a FIFO, not a regular executable file", "--reader-python")
    result = cli("bisect", "--reader-python", str(tmp_path), "--", *MARK_COMMAND, str(mark))
    _refused(result, "is a folder, not a regular executable file", "--reader-python")
    result = cli("bisect", "--reader-python", str(tmp_path / "none"), "--", *MARK_COMMAND, str(mark))
    _refused(result, "not found", "--reader-python")
    assert not mark.exists()


@pytest.mark.parametrize("option", ["--html", "--svg"])
@pytest.mark.parametrize("kind", ["folder", "fifo", "missing-parent"])
def test_study_outputs_are_checked_before_the_runs(cli, tmp_path: Path, option: str, kind: str) -> None:  # type: ignore[no-untyped-def]
    target, mark = tmp_path / "figure", tmp_path / "mark"
    if kind == "folder":
        target.mkdir()
    elif kind == "fifo":
        os.mkfifo(target)
    else:
        target = tmp_path / "no" / "such" / "figure"
    result = cli("study", "-n", "2", option, str(target), "--", *MARK_COMMAND, str(mark))
    _refused(result, str(target.parent if kind == "missing-parent" else target), option)
    assert not mark.exists() and not (tmp_path / "no").exists()


def test_verdict_never_calls_nan_the_same_value_nor_a_share() -> None:
    nan, inf = float("nan"), float("inf")
    for fixed, varied in (
        ([nan] * 3, [1.0, 2.0, 3.0]),
        ([1.0, nan, 1.0], [1.0, 2.0, 3.0]),
        ([1.0, 1.0, 1.0], [1.0, inf, 2.0]),
        ([nan] * 3, [nan] * 3),
    ):
        words = study.verdict("loss", fixed, varied)
        assert "not a finite number" in words and "exactly" not in words and "part of" not in words
        assert study.ratio(fixed, varied) is None and study.bootstrap_ci(fixed, varied) is None
    assert math.isnan(float(study.as_json_number(nan))) and study.as_json_number(0.5) == 0.5


def test_the_node_bootstrap_reads_a_bounded_bundle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """nodeboot.py reads at most MAX_BUNDLE bytes of standard input: a larger one stops before the command
    (its main, in-process, with that standard input; srun runs the same source as `python3 -c`)."""
    from envpin.runs import nodeboot

    mark = tmp_path / "mark"
    stdin = io.TextIOWrapper(io.BytesIO(b"\0" * (nodeboot.MAX_BUNDLE + 1)))
    monkeypatch.setattr("sys.stdin", stdin)
    code = nodeboot.main(["0" * 64, "--", *MARK_COMMAND, str(mark)])
    assert code == nodeboot.BROKEN and "larger than" in capsys.readouterr().err and not mark.exists()


def test_counts_have_one_documented_bound() -> None:
    assert launch.MAX_RUNS == 1000
    assert "1000" in (Path(__file__).parents[2] / "docs" / "runs.md").read_text()


@pytest.mark.parametrize("option", ["--html", "--svg"])
def test_a_figure_named_as_the_keep_folder_is_refused_before_the_runs(cli, tmp_path: Path, option: str) -> None:  # type: ignore[no-untyped-def]
    """--keep makes that folder: the figure could not be written there once every run had ended."""
    keep, mark = tmp_path / "keep", tmp_path / "mark"
    result = cli("study", "-n", "2", "--keep", str(keep), option, str(keep), "--", *MARK_COMMAND, str(mark))
    _refused(result, "name the same path", option)
    assert not mark.exists() and not keep.exists()


def test_a_python_caller_is_told_the_parameter_and_the_command_line_the_option(cli) -> None:  # type: ignore[no-untyped-def]
    """The library names parameters through envpin.errors.param: `runs` to a notebook calling
    envpin.api.study_runs (it once read "pass -n 2 or more"), --runs on the command line."""
    with pytest.raises(UsageError) as info:
        api.study_runs(["true"], runs=1)
    assert info.value.message == "`runs` must be between 2 and 1000, not 1"
    assert info.value.hint == "a spread needs at least 2 runs per arm: pass `runs` 2 or more (5 or more is better)"
    assert "-n" not in info.value.message + info.value.hint
    result = cli("study", "--runs", "1", "--", "true")
    assert result.code == 2 and result.stderr.splitlines() == [
        "error: --runs must be between 2 and 1000, not 1",
        "hint: a spread needs at least 2 runs per arm: pass --runs 2 or more (5 or more is better)",
    ]
    for call, words in (
        (lambda: api.study_runs(["true"], jobs=0), "`jobs` must be between 1 and 1000, not 0"),
        (lambda: api.cost_runs(["true"], repeat=1), "`repeat` must be between 2 and 1000, not 1"),
        (lambda: api.bisect_runs(["true"], seed=-1), "`seed` must be between 0 and 4294967295, not -1"),
        (lambda: api.study_runs(["true"], partition="gpu"), "`partition` and `slurm_args` need `slurm`"),
    ):
        with pytest.raises(UsageError) as info:
            call()
        assert info.value.message == words and "--" not in info.value.message + (info.value.hint or "")
