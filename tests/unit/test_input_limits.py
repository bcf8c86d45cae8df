"""Documented input limits: nesting, number length and path length are refused with one error and a hint,
never an internal error, and pathological Dockerfile nesting is parsed without recursion."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envpin.errors import ReportError
from envpin.files import read as fsread
from tests.fleetdata import node


def _one_error(res, needle: str) -> None:  # type: ignore[no-untyped-def]
    lines = res.stderr.splitlines()
    assert res.code == 2 and res.stdout == "", res.stderr
    assert len(lines) == 2 and lines[0].startswith("error: ") and needle in lines[0], lines
    assert lines[1].startswith("hint: ") and "internal error" not in res.stderr


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('{"probe_schema": 1, "a": ' + "[" * 3000 + "]" * 3000 + "}", "nested more than 64 levels deep"),
        ('{"a": ' * 3000 + "1" + "}" * 3000, "nested more than 64 levels deep"),
        ('{"probe_schema": 1, "cpu": {"x": {"value": ' + "9" * 5000 + "}}}", "holds a number too long to read"),
        ('{"probe_schema": 1, "selftest": [1]}', "section 'selftest' is not an object"),
        ('{"probe_schema": true}', "probe_schema must be a positive integer, not True"),
        ('{"probe_schema": -7}', "probe_schema must be a positive integer, not -7"),
        ("{not json", "is not valid JSON (line 1, column 2"),
    ],
)
def test_malformed_reports_are_one_error(cli, tmp_path: Path, text: str, needle: str) -> None:  # type: ignore[no-untyped-def]
    report = tmp_path / "r.json"
    report.write_text(text)
    _one_error(cli("diff", str(report), str(report)), needle)


def test_parse_json_depth_is_counted_without_recursion() -> None:
    ok = json.dumps({"a": [[{"b": 1}]]})
    assert fsread.parse_json(ok, "x", ReportError) == {"a": [[{"b": 1}]]}
    at_limit = "[" * fsread.MAX_JSON_DEPTH + "]" * fsread.MAX_JSON_DEPTH
    assert fsread.parse_json(at_limit, "x", ReportError) is not None
    with pytest.raises(ReportError, match="nested more than 64"):
        fsread.parse_json("[" + at_limit + "]", "x", ReportError)


def test_over_long_out_paths_are_refused_before_anything_is_written(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    name = tmp_path / ("a" * 300)
    _one_error(cli("render", "--ngc", "20.02", "--tf", "2.1", "--out", str(name)), "a name of 300 bytes")
    deep = tmp_path / ("d/" * 2100)
    _one_error(cli("render", "--ngc", "20.02", "--tf", "2.1", "--out", str(deep)), "paths are limited to 4,095")
    _one_error(cli("probe", "--out", str(name)), "a name of 300 bytes")
    _one_error(cli("probe", "--output", str(name)), "--output has a name of 300 bytes")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "line",
    [
        "RUN echo " + "$(" * 3000,
        "RUN echo " + "<(" * 3000,
        "RUN echo " + "$(echo " * 500 + ")" * 500,
        "CMD " + "[" * 3000 + "]" * 3000,
        "FROM " + "${A:-" * 3000 + "ubuntu:22.04" + "}" * 3000,
        "RUN echo " + "${A:-" * 3000 + "x" + "}" * 3000,
        "RUN echo " + "${" * 50000,  # every '${' unclosed: the brace count is done once, not once per '${'
        "\\",  # a line that is only a continuation, at the end of the file
    ],
)
def test_pathological_nesting_in_a_dockerfile_is_audited(cli, tmp_path: Path, line: str) -> None:  # type: ignore[no-untyped-def]
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(f"FROM ubuntu:22.04\n{line}\n")
    res = cli("audit", str(dockerfile), "--format", "json")
    assert res.code in (0, 1), res.stderr
    assert "internal error" not in res.stderr
    assert isinstance(json.loads(res.stdout), (dict, list))


def test_an_error_without_its_own_hint_points_at_the_commands_help(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    report = tmp_path / "r.json"
    report.write_text('{"probe_schema": 1, "selftest": [1]}')
    res = cli("diff", str(report), str(report))
    assert res.stderr.splitlines()[-1] == "hint: see 'envpin diff --help'"


@pytest.mark.parametrize(
    ("tf", "needle"),
    [
        ("abc", "'abc' is not a TensorFlow version"),
        ("", "'' is not a TensorFlow version"),
        ("٢.١", "is not a TensorFlow version"),
        ("2", "--tf 2 names no minor version"),
    ],
)
def test_audit_refuses_a_tf_that_is_not_major_minor(cli, tmp_path: Path, tf: str, needle: str) -> None:  # type: ignore[no-untyped-def]
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text("FROM ubuntu:22.04\n")
    _one_error(cli("audit", "--tf", tf, str(dockerfile)), needle)


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["render", "--ngc", "20.02", "--tf", "2.1", "--out", "missing/env"], "--out"),
        (["probe", "--out", "missing/reports"], "--out"),
        (["probe", "-o", "missing/report.json"], "--output"),
        (["probe", "--markdown", "missing/report.md"], "--markdown"),
        (["probe", "--image", "registry.example.com/x:1", "--out", "missing/reports"], "--out"),
        (["lock", "Dockerfile", "--ngc", "20.02", "--out", "missing/requirements.lock"], "--out"),
        (["fleet", "manifest", "--kubernetes", "--out", "missing/probe.yaml"], "--out"),
        (["fleet", "report", "REPORT", "--html", "missing/fleet.html"], "--html"),
        (["audit", "Dockerfile", "--fix", "--fix-out", "missing/Dockerfile"], "--fix-out"),
    ],
)
def test_a_missing_parent_folder_is_refused_not_created(cli, tmp_path: Path, args: list[str], option: str) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "Dockerfile").write_text("FROM ubuntu:22.04\n")
    report = tmp_path / "r.json"
    report.write_text(json.dumps(node("n1")))  # a probe report (fleet report checks --html before reading it)
    args = [str(report) if a == "REPORT" else a for a in args]
    before = sorted(p.name for p in tmp_path.iterdir())
    res = cli(*args, cwd=tmp_path)
    _one_error(res, f"{option}: the folder missing does not exist")
    assert "mkdir -p missing" in res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_an_output_under_a_file_is_refused(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "afile").write_text("")
    res = cli("render", "--ngc", "20.02", "--tf", "2.1", "--out", "afile/env", cwd=tmp_path)
    _one_error(res, "--out: afile is not a folder")
    assert "mkdir" not in res.stderr


def test_the_default_environment_folder_makes_images_on_first_use(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    res = cli("render", "--ngc", "20.02", "--tf", "2.1", cwd=tmp_path)
    assert res.code == 0, res.stderr
    assert (tmp_path / "images" / "20.02-tf2" / "Dockerfile").is_file()


def test_a_log_tail_is_its_last_bytes_and_never_waits_on_a_fifo(tmp_path: Path) -> None:
    """A run's log is read from its end (the metrics line comes last), bounded, and only from a regular file."""
    log = tmp_path / "stdout.log"
    log.write_bytes(b"x" * 100_000 + b'\n{"envpin_metrics": {"loss": 1.5}}\n')
    tail = fsread.read_tail(log, 64)
    assert len(tail) == 64 and tail.endswith(b'{"envpin_metrics": {"loss": 1.5}}\n')
    assert fsread.read_tail(log) == log.read_bytes()
    fifo = tmp_path / "fifo"
    import os

    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file"):
        fsread.read_tail(fifo)
    with pytest.raises(IsADirectoryError):
        fsread.read_tail(tmp_path)
