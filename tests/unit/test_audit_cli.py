"""`envpin audit` on the command line: exit codes, --fail-on, JSON, SARIF and the bad-input contract."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from envpin.audit import RULES

DIGEST = "@sha256:" + "cd" * 32
INFO_ONLY = f"FROM nvcr.io/nvidia/tensorflow:25.01-tf2-py3{DIGEST}\nENV PYTHONHASHSEED=0\n"
WARNINGS = (
    f"FROM nvcr.io/nvidia/tensorflow:20.02-tf2-py3{DIGEST}\nENV TF_DETERMINISTIC_OPS=1 PYTHONHASHSEED=0\n"
    "RUN pip install numpy==1.18.5\n"
)
ERRORS = "FROM nvcr.io/nvidia/tensorflow:20.02-tf2-py3\nENV TF_CUDNN_USE_AUTOTUNE=0\nRUN curl -s https://x/i.sh | sh\n"

#: What GitHub code scanning requires of an uploaded SARIF file (docs: "SARIF support for code scanning").
GITHUB_SARIF = {
    "type": "object",
    "required": ["version", "runs"],
    "properties": {
        "version": {"const": "2.1.0"},
        "runs": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["tool", "results"],
                "properties": {
                    "tool": {
                        "type": "object",
                        "required": ["driver"],
                        "properties": {
                            "driver": {
                                "type": "object",
                                "required": ["name", "rules"],
                                "properties": {
                                    "rules": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "required": ["id", "shortDescription", "help", "defaultConfiguration"],
                                            "properties": {
                                                "help": {"type": "object", "required": ["text"]},
                                                "defaultConfiguration": {
                                                    "properties": {"level": {"enum": ["note", "warning", "error"]}}
                                                },
                                            },
                                        },
                                    }
                                },
                            }
                        },
                    },
                    "results": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["ruleId", "level", "message", "locations"],
                            "properties": {
                                "level": {"enum": ["note", "warning", "error"]},
                                "message": {"type": "object", "required": ["text"]},
                                "locations": {
                                    "type": "array",
                                    "minItems": 1,
                                    "items": {
                                        "type": "object",
                                        "required": ["physicalLocation"],
                                        "properties": {
                                            "physicalLocation": {
                                                "type": "object",
                                                "required": ["artifactLocation", "region"],
                                                "properties": {
                                                    "artifactLocation": {
                                                        "type": "object",
                                                        "required": ["uri"],
                                                        "properties": {"uri": {"type": "string", "pattern": "^[^/]"}},
                                                    },
                                                    "region": {
                                                        "type": "object",
                                                        "required": ["startLine"],
                                                        "properties": {"startLine": {"type": "integer", "minimum": 1}},
                                                    },
                                                },
                                            }
                                        },
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
    },
}


def _write(tmp_path: Path, name: str, text: str) -> str:
    (tmp_path / name).write_text(text)
    return name


@pytest.mark.parametrize(
    ("text", "fail_on", "code"),
    [
        (INFO_ONLY, "warning", 0),
        (INFO_ONLY, "info", 1),
        (WARNINGS, "warning", 1),
        (WARNINGS, "error", 0),
        (ERRORS, "error", 1),
    ],
)
def test_exit_code_follows_fail_on(cli, tmp_path: Path, text: str, fail_on: str, code: int) -> None:  # type: ignore[no-untyped-def]
    name = _write(tmp_path, "Dockerfile", text)
    res = cli("audit", "--fail-on", fail_on, name, cwd=tmp_path)
    assert res.code == code, res.stderr
    assert res.stderr == ""  # the table and the summary are the result: stdout
    assert "finding" in res.stdout


def test_default_fail_on_is_warning_and_table_names_file_line(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    name = _write(tmp_path, "Dockerfile", ERRORS)
    res = cli("audit", name, cwd=tmp_path)
    assert res.code == 1
    for rule in ("from-no-digest", "cudnn-autotune-set", "curl-pipe-shell", "d9m-env-missing"):
        assert rule in res.stdout
    assert "Dockerfile:2" in res.stdout and "Dockerfile:3" in res.stdout


def test_json_is_sorted_and_complete(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    a = _write(tmp_path, "a.Dockerfile", ERRORS)
    b = _write(tmp_path, "b.Dockerfile", INFO_ONLY)
    res = cli("audit", "--json", a, b, cwd=tmp_path)
    assert res.code == 1
    doc = json.loads(res.stdout)
    assert res.stdout == json.dumps(doc, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    assert doc["files"] == [a, b] and doc["fail_on"] == "warning" and doc["exit_code"] == 1
    keys = [(f["file"], f["line"], f["rule"]) for f in doc["findings"]]
    assert keys == sorted(keys) and {k[0] for k in keys} == {a, b}
    assert doc["summary"] == {s: sum(f["severity"] == s for f in doc["findings"]) for s in ("error", "warning", "info")}
    assert all(set(f) == {"file", "line", "rule", "severity", "message", "fix"} for f in doc["findings"])


def test_sarif_is_what_code_scanning_accepts(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    sub = tmp_path / "docker"
    sub.mkdir()
    (sub / "Dockerfile").write_text(ERRORS + "RUN pip install numpy\n")
    res = cli("audit", "--sarif", "docker/Dockerfile", cwd=tmp_path)
    assert res.code == 1
    sarif = json.loads(res.stdout)
    jsonschema.validate(sarif, GITHUB_SARIF)
    run = sarif["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == sorted(RULES)
    assert sarif["$schema"].endswith("sarif-2.1.0.json")
    results = run["results"]
    assert results and all(rules[r["ruleIndex"]]["id"] == r["ruleId"] for r in results)
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in results}
    assert uris == {"docker/Dockerfile"}
    levels = {r["ruleId"]: r["level"] for r in results}
    assert levels["cudnn-autotune-set"] == "error" and levels["pip-unpinned"] == "warning"
    lines = {(r["ruleId"], r["locations"][0]["physicalLocation"]["region"]["startLine"]) for r in results}
    assert ("curl-pipe-shell", 3) in lines and ("pip-unpinned", 4) in lines


def test_sarif_levels_for_info_are_notes(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    name = _write(tmp_path, "Dockerfile", INFO_ONLY)
    sarif = json.loads(cli("audit", "--sarif", name, cwd=tmp_path).stdout)
    assert [r["level"] for r in sarif["runs"][0]["results"]] == ["note"]


def _one_line_error(res, fragment: str) -> None:  # type: ignore[no-untyped-def]
    assert res.code == 2, res.stderr
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert lines[0].startswith("error: ") and fragment in lines[0], res.stderr
    assert len(lines) <= 2 and (len(lines) == 1 or lines[1].startswith("hint: ")), res.stderr
    assert "Traceback" not in res.stderr and res.stdout == ""


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b"FROM x:1\nRUN a\x00b\n", "bad:2: binary file"),
        (b"FROM x:1\nLABEL a=\xff\n", "bad:2: not UTF-8"),
    ],
)
def test_unreadable_files_exit_2_and_write_nothing(cli, tmp_path: Path, content: bytes, fragment: str) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "bad").write_bytes(content)
    good = _write(tmp_path, "good", ERRORS)
    for args in (["bad"], ["--json", good, "bad"], ["--sarif", "bad"], ["--fix", "--no-resolve", good, "bad"]):
        _one_line_error(cli("audit", *args, cwd=tmp_path), fragment)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad", "good"]
    assert (tmp_path / "bad").read_bytes() == content


@pytest.mark.parametrize(
    ("content", "line", "fragment"),
    [
        (b"FROM x:1\nRUN echo \\\n", 2, "ends with a line continuation"),
        (b"RUN echo\nFROM x:1\n", 1, "RUN before the first FROM"),
        (b"FROM x:1\nFETCH x\n", 2, "unknown instruction 'FETCH'"),
    ],
)
def test_a_rejected_line_is_a_finding_and_the_rest_is_audited(  # type: ignore[no-untyped-def]
    cli, tmp_path: Path, content: bytes, line: int, fragment: str
) -> None:
    (tmp_path / "bad").write_bytes(content)
    good = _write(tmp_path, "good", ERRORS)
    res = cli("audit", "--json", "bad", good, cwd=tmp_path)
    assert res.code == 1, res.stderr
    found = json.loads(res.stdout)["findings"]
    parse_errors = [f for f in found if f["rule"] == "parse-error"]
    assert [(f["file"], f["line"], f["severity"]) for f in parse_errors] == [("bad", line, "error")]
    assert fragment in parse_errors[0]["message"]
    assert {f["file"] for f in found} == {"bad", "good"}  # the other file is still audited
    # --fix rewrites files, so it refuses one it cannot fully read, and writes nothing.
    _one_line_error(cli("audit", "--fix", "--no-resolve", good, "bad", cwd=tmp_path), f"bad:{line}: ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad", "good"]


def test_a_forgotten_continuation_still_audits_the_rest_of_the_file() -> None:
    from envpin.audit import audit_text

    text = (
        "FROM nvcr.io/nvidia/tensorflow:20.02-tf2-py3\n"
        "RUN apt-get update && \\\n    apt-get install -y curl\n    pip install requests\n"
        "ENV TF_XLA_FLAGS=--tf_xla_auto_jit=2\n"
    )
    found = audit_text(text, tolerant=True)
    assert ("parse-error", 4) in [(f.rule, f.line) for f in found]
    assert "unknown instruction 'pip'" in next(f.message for f in found if f.rule == "parse-error")
    assert {"apt-unpinned", "from-no-digest", "d9m-env-missing"} <= {f.rule for f in found}


def test_missing_and_directory_inputs(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _one_line_error(cli("audit", "nope", cwd=tmp_path), "nope: no such file")
    (tmp_path / "dir").mkdir()
    _one_line_error(cli("audit", "dir", cwd=tmp_path), "dir: is a folder with no Python script in it")


def test_option_errors(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    name = _write(tmp_path, "Dockerfile", WARNINGS)
    _one_line_error(cli("audit", "--json", "--sarif", name, cwd=tmp_path), "exclude each other")
    _one_line_error(
        cli("audit", "--fail-on", "fatal", name, cwd=tmp_path), "'fatal' is not one of 'error', 'warning', 'info'"
    )
    _one_line_error(cli("audit", "--build-arg", "NOEQUALS", name, cwd=tmp_path), "is not NAME=VALUE")
    _one_line_error(cli("audit", "--in-place", name, cwd=tmp_path), "only make sense with --fix")
    _one_line_error(cli("audit", "--target", "nope", name, cwd=tmp_path), "no stage named 'nope'")
    _one_line_error(cli("audit", "--fix", "--fix-out", "o", name, name, cwd=tmp_path), "names one output file")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Dockerfile"]


def test_build_arg_and_tf_options(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    text = "ARG REL\nFROM nvcr.io/nvidia/tensorflow:${REL}-tf2-py3\nENV PYTHONHASHSEED=0\n"
    name = _write(tmp_path, "Dockerfile", text)
    plain = json.loads(cli("audit", "--json", name, cwd=tmp_path).stdout)
    assert {f["rule"] for f in plain["findings"]} == {"from-unresolved", "d9m-unknown-tf"}
    known = json.loads(cli("audit", "--json", "--build-arg", "REL=24.01", "--tf", "2.14", name, cwd=tmp_path).stdout)
    assert {f["rule"] for f in known["findings"]} == {"from-no-digest", "d9m-env-missing"}
