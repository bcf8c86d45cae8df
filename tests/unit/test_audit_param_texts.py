"""What the audit says of its parameters, in errors, hints and findings, names them as the caller knows them
(envpin.errors.param): the api's name for a Python caller, the option on the command line (where the text reads
as it always did). Validation a Python caller needs happens in envpin.api.audit_files, before any file is read."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from envpin import api
from envpin.errors import UsageError
from tests.conftest import Result

#: The `cli` fixture: envpin.cli.main run in-process on these arguments.
Cli = Callable[..., Result]

DOCKERFILE = "FROM nvcr.io/nvidia/tensorflow:22.03-tf2-py3\nRUN pip install -r requirements.txt\n"


@pytest.mark.parametrize(
    ("kwargs", "args", "python", "command_line"),
    [
        (
            {"resolve": False},
            ("--no-resolve",),
            ("`no_resolve` only makes sense with `fix`", "add `fix`"),
            ("--no-resolve only makes sense with --fix", "add --fix"),
        ),
        (
            {"context": Path("."), "read_context": False},
            ("--context", ".", "--no-context"),
            ("`context` and `no_context` exclude each other", "choose one"),
            ("--context and --no-context exclude each other", "choose one"),
        ),
        (
            {"output": "yaml"},
            ("--format", "yaml"),
            ("unknown output format 'yaml'", "use `output` tty, json, sarif, gcc, github"),
            ("unknown output format 'yaml'", "use --format tty, json, sarif, gcc, github"),
        ),
        (
            {"tf": "2"},
            ("--tf", "2"),
            ("`tf` 2 names no minor version; a recipe is chosen by MAJOR.MINOR", "e.g. `tf` 2.1"),
            ("--tf 2 names no minor version; a recipe is chosen by MAJOR.MINOR", "e.g. --tf 2.1"),
        ),
        (
            {"context": Path("nothere")},
            ("--context", "nothere"),
            ("`context` nothere is not a directory", "give the folder `docker build` is given"),
            ("--context nothere is not a directory", "give the folder `docker build` is given"),
        ),
        (
            {"build_args": ["BAD"]},
            ("--build-arg", "BAD"),
            ("`build_args` 'BAD' is not NAME=VALUE", "e.g. `build_args` TF_TAG=22.03-tf2-py3"),
            ("--build-arg 'BAD' is not NAME=VALUE", "e.g. --build-arg TF_TAG=22.03-tf2-py3"),
        ),
        (
            {"fix_out": Path("out")},
            ("--fix-out", "out"),
            ("`fix_out` and `in_place` only make sense with `fix`", "add `fix`"),
            ("--fix-out and --in-place only make sense with --fix", "add --fix"),
        ),
        (
            {"fix": True, "fix_out": Path("out"), "in_place": True},
            ("--fix", "--fix-out", "out", "--in-place"),
            ("`fix_out` and `in_place` exclude each other", "choose one"),
            ("--fix-out and --in-place exclude each other", "choose one"),
        ),
        (
            {"fix": True, "resolve": False, "fix_out": Path("Dockerfile")},
            ("--fix", "--no-resolve", "--fix-out", "Dockerfile"),
            ("`fix_out` Dockerfile is the input file", "use `in_place` to overwrite the input"),
            ("--fix-out Dockerfile is the input file", "use --in-place to overwrite the input"),
        ),
    ],
)
def test_errors_name_the_parameter_for_each_caller(
    cli: Cli,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    kwargs: dict[str, Any],
    args: tuple[str, ...],
    python: tuple[str, str],
    command_line: tuple[str, str],
) -> None:
    (tmp_path / "Dockerfile").write_text(DOCKERFILE)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError) as caught:
        api.audit_files([Path("Dockerfile")], use_config=False, **kwargs)
    assert (caught.value.message, caught.value.hint) == python
    res = cli("audit", "--no-config", *args, "Dockerfile", cwd=tmp_path)
    assert (res.code, res.stdout) == (2, "")
    assert res.stderr.splitlines() == [f"error: {command_line[0]}", f"hint: {command_line[1]}"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Dockerfile"]  # nothing written


def test_fail_on_is_checked_for_a_python_caller() -> None:
    """The command line's --fail-on only takes the three severities; a Python caller's value is checked too."""
    with pytest.raises(UsageError) as caught:
        api.audit_files([Path("Dockerfile")], fail_on="fatal", use_config=False)
    assert (caught.value.message, caught.value.hint) == (
        "`fail_on` 'fatal' is not a severity",
        "use error, warning or info",
    )


def test_the_output_format_is_kept_in_the_result(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text(DOCKERFILE)
    run = api.audit_files([tmp_path / "Dockerfile"], output="sarif", use_config=False, read_context=False)
    assert run.output == "sarif" and run.exit_code == 1


def test_two_format_aliases_are_a_command_line_error_only(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text(DOCKERFILE)
    res = cli("audit", "--json", "--sarif", "Dockerfile", cwd=tmp_path)
    assert (res.code, res.stdout) == (2, "")
    assert res.stderr.splitlines() == [
        "error: json and sarif output exclude each other",
        "hint: choose one output format",
    ]


def _fixes(findings: list[dict[str, Any]]) -> dict[str, str]:
    return {f["rule"]: f["fix"] for f in findings}


def test_findings_name_the_fix_and_the_options_for_each_caller(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text(DOCKERFILE)
    (tmp_path / "train.py").write_text("import tensorflow as tf\n\ntf.random.set_seed(1)\nm.fit(x)\n")
    run = api.audit_files([tmp_path / "Dockerfile"], use_config=False, read_context=False)
    python = _fixes([f.to_json() for f in run.findings])
    res = cli("audit", "--no-config", "--no-context", "--format", "json", "Dockerfile", cwd=tmp_path)
    command_line = _fixes(json.loads(res.stdout)["findings"])
    for rule, (mine, theirs) in {
        "from-no-digest": ("(`fix` of audit)", "(envpin audit --fix)"),
        "d9m-env-missing": ("(`fix` of audit adds the recipe's ENV block)", "(envpin audit --fix adds the recipe's"),
        "pythonhashseed-unset": ("(`fix` of audit adds it)", "(envpin audit --fix adds it)"),
    }.items():
        assert mine in python[rule] and theirs in command_line[rule], rule
    messages = {f.rule: f.message for f in run.findings}
    assert messages["pip-requirements-file"].endswith("(the build context is not read: `no_context`)")
    assert json.loads(res.stdout)["findings"][-1]["message"].endswith("(the build context is not read: --no-context)")
    script = api.audit_files([tmp_path / "train.py"], tf="2.8", use_config=False).findings
    assert "for TensorFlow 2.8 (`tf` 2.8)" in script[0].message
    res = cli("audit", "--no-config", "--tf", "2.8", "train.py", cwd=tmp_path)
    assert "for TensorFlow 2.8 (--tf 2.8)" in res.stdout and "(envpin audit --fix inserts it)" in res.stdout
