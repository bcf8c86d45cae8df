"""The pre-commit hooks (.pre-commit-hooks.yaml), run by the real pre-commit on a scratch repository with
`pre-commit try-repo`, which installs envpin from this checkout into its own environment."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, run_envpin


def _pre_commit() -> str:
    exe = shutil.which("pre-commit") or str(Path(sys.executable).with_name("pre-commit"))
    if not Path(exe).exists():
        pytest.skip("pre-commit is not installed (pip install -e '.[test]')")
    return exe


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args], cwd=repo, check=True, capture_output=True
    )


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One PRE_COMMIT_HOME for the module: the hook environment is built once."""
    return tmp_path_factory.mktemp("pre-commit-home")


def _try(repo: Path, home: Path, hook: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PRE_COMMIT_HOME": str(home), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    return subprocess.run(
        [_pre_commit(), "try-repo", str(REPO), hook, "--all-files", "--verbose"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    repo = tmp_path / "team-repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    return repo


def test_audit_hook_reports_in_compiler_form_and_fails(scratch: Path, home: Path) -> None:
    (scratch / "docker").mkdir()
    (scratch / "docker" / "train.Dockerfile").write_text(
        "FROM nvcr.io/nvidia/tensorflow:20.02-tf2-py3\nRUN pip install requests\n"
    )
    (scratch / "README.md").write_text("FROM not-a-dockerfile\n")
    _git(scratch, "add", "-A")
    res = _try(scratch, home, "envpin-audit")
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert "docker/train.Dockerfile:2:1: warning: pip install without == pins: requests" in out
    assert "README.md" not in out.split("envpin audit", 1)[1]  # only Dockerfiles are passed


def test_audit_hook_judges_python_scripts_with_the_dockerfiles(scratch: Path, home: Path) -> None:
    digest = "@sha256:" + "cd" * 32
    (scratch / "Dockerfile").write_text(
        f"FROM nvcr.io/nvidia/tensorflow:21.06-tf2-py3{digest}\n"
        "ENV PYTHONHASHSEED=0 TF_DETERMINISTIC_OPS=1 TF_CUDNN_USE_FRONTEND=1\n"
    )
    (scratch / "train.py").write_text("import tensorflow as tf\n\ny = tf.math.unsorted_segment_sum([1.0], [0], 1)\n")
    _git(scratch, "add", "-A")
    res = _try(scratch, home, "envpin-audit")
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert "train.py:3:1: error: tf.math.unsorted_segment_sum raises UnimplementedError" in out


def test_audit_hook_passes_a_clean_dockerfile(scratch: Path, home: Path) -> None:
    digest = "@sha256:" + "cd" * 32
    (scratch / "Dockerfile").write_text(f"FROM nvcr.io/nvidia/tensorflow:25.01-tf2-py3{digest}\nENV PYTHONHASHSEED=0\n")
    _git(scratch, "add", "-A")
    res = _try(scratch, home, "envpin-audit")
    assert res.returncode == 0, res.stdout + res.stderr


def test_lock_check_hook_fails_on_a_stale_lock(scratch: Path, home: Path) -> None:
    assert run_envpin("render", "--ngc", "21.06-tf2-py3", cwd=scratch).code == 0
    _git(scratch, "add", "-A")
    ok = _try(scratch, home, "envpin-lock-check")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    (scratch / "images" / "21.06-tf2" / "Dockerfile").write_text("FROM elsewhere\n")
    _git(scratch, "add", "-A")
    stale = _try(scratch, home, "envpin-lock-check")
    assert stale.returncode == 1 and "images/21.06-tf2/envpin.lock is stale" in stale.stdout + stale.stderr


def test_the_repositorys_own_hooks_pass_on_a_clean_clone_and_change_nothing(home: Path, tmp_path: Path) -> None:
    """.pre-commit-config.yaml (ruff check, ruff format, mypy from the dev environment) on a clone of this
    checkout's last commit: every hook passes and no file changes, the audit corpora (excluded from formatting:
    their answer keys name lines) included."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True, capture_output=True)
    (clone / ".venv").symlink_to(Path(sys.executable).parent.parent)
    env = {**os.environ, "PRE_COMMIT_HOME": str(home)}
    proc = subprocess.run(
        [_pre_commit(), "run", "--all-files"], cwd=clone, env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    changed = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True, check=True)
    assert changed.stdout == ""
