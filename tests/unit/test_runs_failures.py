"""envpin bisect/study/cost on commands that fail in odd ways, through the real CLI: each is one error line and
one hint line (exit 2) that says what happened, never another failure's words."""

from __future__ import annotations

import sys
from pathlib import Path


def _one_error(result) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    lines = result.stderr.strip().splitlines()
    assert result.code == 2, result.stderr
    assert len(lines) == 2 and lines[0].startswith("error:") and lines[1].startswith("hint:"), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0], lines[1]


def test_a_killed_run_is_not_called_a_timeout(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """SIGKILL (the out-of-memory killer's signal) without --timeout: the signal is named, --timeout is not;
    the hint names no folder of the temporary work folder, which is removed by then."""
    kill = ("import os, signal, sys; sys.stderr.write('loading\\n'); sys.stderr.flush(); "
            "os.kill(os.getpid(), signal.SIGKILL)")
    error, hint = _one_error(cli("study", "-n", "2", "--", sys.executable, "-c", kill))
    assert "killed by signal 9 (SIGKILL) (fixed 1): loading" in error and "timeout" not in error + hint
    assert "envpin-runs-" not in hint and "--keep DIR" in hint
    error, _ = _one_error(cli("cost", "-r", "2", "--", sys.executable, "-c", "import os; os.abort()"))
    assert "killed by signal 6 (SIGABRT) (without recipe 1)" in error and "status" not in error
    error, hint = _one_error(cli("study", "-n", "2", "--timeout", "0.5", "--", sys.executable, "-c",
                                 "import time; time.sleep(30)"))
    assert "did not finish within --timeout" in error and "signal" not in error and "--timeout" in hint
