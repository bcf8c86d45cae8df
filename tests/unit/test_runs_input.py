"""envpin bisect/study/cost refuse bad input through the real CLI before any run starts (one error line, one
hint line, exit 2, nothing written), and a metric that is nan or inf is reported as such, never as a spread."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envpin.runs import launch, study

#: A command that leaves a mark when it runs: refused input must leave none.
MARK = "import sys; open(sys.argv[1], 'w').write('ran')"


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
        (("study", "-n", "1"), "-n", "between 2 and 1000"),
        (("study", "-n", "100000000"), "-n", "between 2 and 1000"),
        (("study", "-n", "3", "-j", "0"), "-j", "between 1 and 1000"),
        (("study", "-n", "3", "-j", "1001"), "-j", "between 1 and 1000"),
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
    result = cli(*args, "--keep", str(keep), "--", sys.executable, "-c", MARK, str(mark))
    _refused(result, needle, option)
    assert not mark.exists() and not keep.exists()


def test_reader_python_that_is_a_fifo_is_named_for_what_it_is(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    fifo, mark = tmp_path / "python", tmp_path / "mark"
    os.mkfifo(fifo)
    os.chmod(fifo, 0o755)
    result = cli("bisect", "--reader-python", str(fifo), "--", sys.executable, "-c", MARK, str(mark))
    _refused(result, "is a FIFO, not a regular executable file", "--reader-python")
    result = cli("bisect", "--reader-python", str(tmp_path), "--", sys.executable, "-c", MARK, str(mark))
    _refused(result, "is a folder, not a regular executable file", "--reader-python")
    result = cli("bisect", "--reader-python", str(tmp_path / "none"), "--", sys.executable, "-c", MARK, str(mark))
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
    result = cli("study", "-n", "2", option, str(target), "--", sys.executable, "-c", MARK, str(mark))
    _refused(result, str(target.parent if kind == "missing-parent" else target), option)
    assert not mark.exists() and not (tmp_path / "no").exists()


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


def test_the_node_bootstrap_reads_a_bounded_bundle(tmp_path: Path) -> None:
    """nodeboot.py reads at most MAX_BUNDLE bytes of standard input: a larger one stops before the command."""
    from envpin.runs import nodeboot

    mark = tmp_path / "mark"
    boot = Path(nodeboot.__file__).read_text()
    args = [sys.executable, "-c", boot, "0" * 64, "--", sys.executable, "-c", MARK, str(mark)]
    proc = subprocess.run(args, input=b"\0" * (nodeboot.MAX_BUNDLE + 1), capture_output=True, timeout=120)
    assert proc.returncode == nodeboot.BROKEN and b"larger than" in proc.stderr and not mark.exists()


def test_counts_have_one_documented_bound() -> None:
    assert launch.MAX_RUNS == 1000
    assert "1000" in (Path(__file__).parents[2] / "docs" / "runs.md").read_text()


@pytest.mark.parametrize("option", ["--html", "--svg"])
def test_a_figure_named_as_the_keep_folder_is_refused_before_the_runs(cli, tmp_path: Path, option: str) -> None:  # type: ignore[no-untyped-def]
    """--keep makes that folder: the figure could not be written there once every run had ended."""
    keep, mark = tmp_path / "keep", tmp_path / "mark"
    result = cli(
        "study", "-n", "2", "--keep", str(keep), option, str(keep), "--", sys.executable, "-c", MARK, str(mark)
    )
    _refused(result, "name the same path", option)
    assert not mark.exists() and not keep.exists()
