"""The composite GitHub Action (action.yml): its shell steps run here with bash as the runner would run them
(inputs through env, GITHUB_OUTPUT a file); the `uses:` steps (setup-python, the SARIF upload) and the install
step (pip install of this checkout, which the environment already has) are GitHub's side."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO

ACTION = yaml.safe_load((REPO / "action.yml").read_text())
DIGEST = "@sha256:" + "cd" * 32


def _step(step_id: str) -> dict[str, Any]:
    return next(s for s in ACTION["runs"]["steps"] if s.get("id") == step_id)


def _run(
    step_id: str, cwd: Path, inputs: dict[str, str], extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    step = _step(step_id)
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"  # the envpin the runner's pip would install
    env["GITHUB_OUTPUT"] = str(cwd / "github-output")  # the runner's step-output file
    for name, value in step.get("env", {}).items():
        expr = value.strip()
        if expr.startswith("${{ inputs.") and expr.endswith("}}"):
            key = expr[len("${{ inputs.") : -2].strip()
            env[name] = inputs.get(key, ACTION["inputs"][key].get("default", ""))
        elif extra and name in extra:
            env[name] = extra[name]
    return subprocess.run(
        [shutil.which("bash") or "bash", "-e", "-c", step["run"]],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_inputs_outputs_and_steps_are_wired() -> None:
    assert ACTION["runs"]["using"] == "composite"
    assert set(ACTION["inputs"]) == {
        "dockerfiles",
        "scripts",
        "fail-on",
        "context",
        "sarif-file",
        "upload-sarif",
        "python-version",
    }
    assert ACTION["outputs"]["exit-code"]["value"] == "${{ steps.audit.outputs.exit-code }}"
    upload = _step("upload")
    assert upload["uses"].startswith("github/codeql-action/upload-sarif@")
    assert upload["with"]["sarif_file"] == "${{ inputs.sarif-file }}"
    assert "$GITHUB_ACTION_PATH" in _step("install")["run"]


def test_findings_become_annotations_sarif_an_output_and_a_failing_verdict(tmp_path: Path) -> None:
    (tmp_path / "docker").mkdir()
    (tmp_path / "docker" / "a.Dockerfile").write_text(
        "FROM nvcr.io/nvidia/tensorflow:20.02-tf2-py3\nRUN pip install requests\n"
    )
    (tmp_path / "Dockerfile").write_text(
        f"FROM nvcr.io/nvidia/tensorflow:25.01-tf2-py3{DIGEST}\nENV PYTHONHASHSEED=0\n"
    )
    res = _run("audit", tmp_path, {"dockerfiles": "Dockerfile docker/*.Dockerfile"})
    assert res.returncode == 0, res.stderr  # the step records the verdict; the SARIF is uploaded before it fails
    assert "::warning file=docker/a.Dockerfile,line=2,title=envpin pip-unpinned::" in res.stdout
    assert (tmp_path / "github-output").read_text() == "exit-code=1\n"
    sarif = json.loads((tmp_path / "envpin-audit.sarif").read_text())
    assert sarif["version"] == "2.1.0"
    assert {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in sarif["runs"][0]["results"]} >= {
        "docker/a.Dockerfile"
    }
    assert _run("verdict", tmp_path, {}, {"EXIT_CODE": "1"}).returncode == 1
    assert _run("verdict", tmp_path, {}, {"EXIT_CODE": "0"}).returncode == 0


def test_fail_on_input(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text(
        f"FROM nvcr.io/nvidia/tensorflow:25.01-tf2-py3{DIGEST}\nENV PYTHONHASHSEED=0\nRUN pip install requests\n"
    )
    assert _run("audit", tmp_path, {"fail-on": "error"}).returncode == 0
    assert (tmp_path / "github-output").read_text() == "exit-code=0\n"  # warnings only


def test_a_usage_error_fails_the_audit_step_itself(tmp_path: Path) -> None:
    res = _run("audit", tmp_path, {"dockerfiles": "missing/Dockerfile"})
    assert res.returncode == 2 and "error: missing/Dockerfile: no such file" in res.stderr
    assert not (tmp_path / "envpin-audit.sarif").exists()


@pytest.mark.parametrize("ctx_dir, found", [("", False), (".", True)])
def test_context_input(tmp_path: Path, ctx_dir: str, found: bool) -> None:
    (tmp_path / "docker").mkdir()
    (tmp_path / "docker" / "Dockerfile").write_text(
        f"FROM python:3.11{DIGEST}\nENV PYTHONHASHSEED=0\nCOPY app/req.txt .\nRUN pip install -r req.txt\n"
    )
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "req.txt").write_text("numpy\n")
    res = _run("audit", tmp_path, {"dockerfiles": "docker/Dockerfile", "context": ctx_dir})
    assert ("file=app/req.txt,line=1" in res.stdout) is found, res.stdout


def test_scripts_input_audits_training_scripts_against_the_dockerfiles_tensorflow(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text(
        f"FROM nvcr.io/nvidia/tensorflow:21.06-tf2-py3{DIGEST}\n"
        "ENV PYTHONHASHSEED=0 TF_DETERMINISTIC_OPS=1 TF_CUDNN_USE_FRONTEND=1\n"
    )
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(
        "import tensorflow as tf\n\ny = tf.math.unsorted_segment_sum([1.0], [0], num_segments=1)\n"
    )
    res = _run("audit", tmp_path, {"scripts": "src/*.py"})
    assert res.returncode == 0, res.stderr
    assert "::error file=src/train.py,line=3,title=envpin py-op-raises::" in res.stdout
    assert "TF_DISABLE_SEGMENT_REDUCTION_OP_DETERMINISM_EXCEPTIONS" in res.stdout
    sarif = json.loads((tmp_path / "envpin-audit.sarif").read_text())
    assert {r["ruleId"] for r in sarif["runs"][0]["results"]} == {"py-op-raises"}
