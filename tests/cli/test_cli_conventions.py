"""Conventions every command shares: --format text|json (--json kept as its alias), choices listed as enums,
-q/--quiet and -v/--verbose, shell completion, and probe's -o/--output with the old --json FILE deprecated."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.conftest import run_envpin
from tests.unit.test_cli_conventions import ENVPIN


def test_shell_completion_completes_commands_and_choices() -> None:
    def complete(words: str, cword: int) -> list[str]:
        env = {**os.environ, "_ENVPIN_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(cword)}
        res = subprocess.run([ENVPIN], env=env, capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr
        return res.stdout.split()

    assert complete("envpin ca", 1) == ["catalog"]
    assert complete("envpin probe --gpus ", 3) == ["auto", "all", "none"]
    script = run_envpin("--show-completion", "bash")
    assert script.code == 0 and "_envpin_completion" in script.stdout and "complete " in script.stdout


def test_progress_is_off_in_a_pipe_and_plain_lines_with_verbose(tmp_path: Path) -> None:
    """stderr is a pipe here: no spinner; a command over within a few seconds prints no progress line, -v
    prints every step as one (a CI log); -q prints nothing. (Plain lines as work units end: test_progress.)"""
    out = tmp_path / "env"
    assert run_envpin("render", "--ngc", "20.02", "--tf", "2.1", "--out", str(out)).code == 0
    lock = str(out / "envpin.lock")
    plain = run_envpin("lock", "--check", "--lock", lock)
    assert plain.code == 0 and "envpin lock: checking" not in plain.stderr
    verbose = run_envpin("-v", "lock", "--check", "--lock", lock)
    assert verbose.code == 0 and "envpin lock: checking" in verbose.stderr
    quiet = run_envpin("-q", "lock", "--check", "--lock", lock)
    assert quiet.code == 0 and quiet.stderr == ""
