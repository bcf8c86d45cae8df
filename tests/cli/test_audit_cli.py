"""`envpin audit` through the installed console script, in a process of its own: the exit code and streams a
shell or CI job sees (the in-process tests of the command are in tests/unit/test_audit_cli.py)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_envpin
from tests.unit.test_audit_cli import ERRORS


def test_subprocess_exit_code(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text(ERRORS)
    res = run_envpin("audit", "--fail-on", "error", "Dockerfile", cwd=tmp_path)
    assert res.code == 1 and res.stderr == "" and "cudnn-autotune-set" in res.stdout
