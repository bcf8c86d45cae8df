"""Conventions every command shares: --format text|json (--json kept as its alias), choices listed as enums,
-q/--quiet and -v/--verbose, shell completion, and probe's -o/--output with the old --json FILE deprecated."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ENVPIN = str(Path(sys.executable).with_name("envpin"))


@pytest.mark.parametrize(
    "args",
    [
        ("catalog", "--tf", "2.1"),
        ("catalog", "show", "20.02"),
        ("recipe", "--ngc", "20.02", "--tf", "2.1"),
    ],
)
def test_format_json_is_the_json_option(cli, args: tuple[str, ...]) -> None:  # type: ignore[no-untyped-def]
    by_format = cli(*args, "--format", "json")
    by_flag = cli(*args, "--json")
    assert by_format.code == by_flag.code == 0
    assert json.loads(by_format.stdout) == json.loads(by_flag.stdout)
    text = cli(*args, "--format", "text")
    assert text.code == 0 and not text.stdout.lstrip().startswith(("{", "["))


def test_diff_format_json(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    report = tmp_path / "r.json"
    report.write_text(cli("probe").stdout)
    res = cli("diff", str(report), str(report), "--format", "json")
    assert res.code == 0 and json.loads(res.stdout)["counts"] == {"breaking": 0, "info": 0, "risk": 0}


@pytest.mark.parametrize(
    ("args", "listed"),
    [
        (("catalog", "--format", "xml"), "'xml' is not one of 'text', 'json'"),
        (("probe", "--image", "x:1", "--gpus", "some"), "'some' is not one of 'auto', 'all', 'none'"),
        (("catalog", "--flavor", "tf3"), "'tf3' is not one of 'py2', 'py3', 'tf1', 'tf1-py2', 'tf2'"),
        (("build", "--ngc", "20.02", "--engine", "rkt"), "'rkt' is not one of 'auto', 'docker', 'podman'"),
        (("audit", "Dockerfile", "--fail-on", "fatal"), "'fatal' is not one of 'error', 'warning', 'info'"),
        (
            ("lock", "requirements.in", "--ngc", "20.02", "--resolver", "pip"),
            "'pip' is not one of 'auto', 'image', 'host'",
        ),
    ],
)
def test_choices_are_listed_in_the_error(cli, args: tuple[str, ...], listed: str) -> None:  # type: ignore[no-untyped-def]
    res = cli(*args)
    lines = res.stderr.splitlines()
    assert res.code == 2 and len(lines) == 2 and listed in lines[0] and lines[1].startswith("hint: ")


@pytest.mark.parametrize(
    "args",
    [
        ("probe", "-o"),
        ("probe", "--markdown"),
        ("probe", "--json"),
        ("audit", "Dockerfile", "--fix", "--fix-out"),
        ("lock", "requirements.in", "--ngc", "20.02", "--out"),
        ("fleet", "manifest", "--kubernetes", "--out"),
        ("fleet", "report", "reports", "--html"),
        ("study", "--html"),
        ("study", "--svg"),
    ],
)
def test_an_option_that_writes_one_file_refuses_a_folder_name(
    cli,
    tmp_path: Path,  # type: ignore[no-untyped-def]
    args: tuple[str, ...],
) -> None:
    """`--out newdir/` means a folder: as a Path it would lose its slash and a file named `newdir` would be
    written. It is one error before any work, and nothing is created."""
    res = cli(*args, "newdir/", *(["--", "true"] if args[0] == "study" else []), cwd=tmp_path)
    lines = res.stderr.splitlines()
    assert res.code == 2 and len(lines) == 2, res.stderr
    assert "'newdir/' ends with '/', so it names a folder" in lines[0] and lines[1].startswith("hint: ")
    assert list(tmp_path.iterdir()) == []


def test_quiet_drops_notes_but_never_errors(cli) -> None:  # type: ignore[no-untyped-def]
    loud = cli("probe")
    assert loud.stderr.startswith("fingerprint sha256:")  # the summary goes to stderr when JSON is on stdout
    quiet = cli("-q", "probe")
    assert quiet.code == 0 and quiet.stderr == "" and json.loads(quiet.stdout)["fingerprint"]
    failing = cli("-q", "diff", "missing-a.json", "missing-b.json")
    assert failing.code == 2 and failing.stderr.startswith("error: report missing-a.json does not exist")
    both = cli("-q", "-v", "catalog")
    assert both.code == 2 and "--quiet and --verbose exclude each other" in both.stderr


def test_probe_output_option_and_the_deprecated_json_file(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    new = cli("probe", "-o", str(tmp_path / "a.json"))
    assert new.code == 0 and "warning" not in new.stderr and (tmp_path / "a.json").exists()
    old = cli("probe", "--json", str(tmp_path / "b.json"))
    assert old.code == 0 and (tmp_path / "b.json").exists()
    assert "warning: --json FILE is deprecated; use --output FILE (-o FILE)" in old.stderr
    both = cli("probe", "--json", "x", "-o", "y")
    assert both.code == 2 and both.stderr.startswith("error: --json FILE is the old spelling of --output FILE")


@pytest.mark.parametrize("args", [(), ("fleet",)])
def test_no_arguments_print_the_help_on_stdout(cli, args: tuple[str, ...]) -> None:  # type: ignore[no-untyped-def]
    """`envpin` (or a group) alone asks for nothing wrong: the page `--help` prints, on stdout, exit 0."""
    res = cli(*args)
    helped = cli(*args, "--help")
    assert res.code == helped.code == 0, res.stderr
    assert res.stdout == helped.stdout and res.stdout.startswith("Usage: envpin")
    assert "error:" not in res.stderr and "hint:" not in res.stderr
