"""The CLI contract: exit codes, one-line errors with a hint, no tracebacks, nothing half-written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import run_envpin
from tests.unit.test_cli import _one_line_error


def test_real_process_exit_codes_and_debug(tmp_path: Path) -> None:
    res = run_envpin("render", "--ngc", "20.04", "--tf", "2", cwd=tmp_path)
    _one_line_error(res)
    dbg = run_envpin("--debug", "render", "--ngc", "20.04", "--tf", "2", cwd=tmp_path)
    assert dbg.code == 2 and "Traceback" in dbg.stderr
    assert run_envpin("--version").stdout.startswith("envpin ")


def test_debug_keeps_the_exit_code(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """--debug adds the traceback; it does not change exit 2 into Python's exit 1."""
    res = run_envpin("--debug", "render", "--ngc", "20.02", "--tf", "2.1", "--name", "../x", cwd=tmp_path)
    assert res.code == 2 and "Traceback" in res.stderr and "error: " in res.stderr


def test_ctrl_c_after_the_command_returned_flushes_its_output_and_is_one_line() -> None:
    """The command is over and the interpreter is shutting down when Ctrl-C lands: its output still arrives,
    then one `interrupted` line and 130, never a traceback from the console script's last line."""
    program = (
        "import os, signal, sys, time\n"
        "sys.argv = ['envpin', '--version']\n"  # as the console script: the module installs its handler
        "from envpin.__main__ import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "os.kill(os.getpid(), signal.SIGINT)\n"
        "time.sleep(5)\n"
    )
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stderr) == (130, "interrupted\n")
    assert proc.stdout.startswith("envpin ")


@pytest.mark.parametrize(
    "args",
    [
        ("probe", "--image", "example.invalid/tf:1", "--no-selftest", "--quick"),
        ("fleet", "manifest", "--kubernetes", "--image", "example.invalid/tf:1", "--no-selftest", "--quick"),
        ("fleet", "probe", "--slurm", "--no-selftest", "--quick"),
    ],
)
def test_quick_with_no_selftest_is_refused_before_any_work(args: tuple[str, ...]) -> None:
    """--quick shortens a self-test that --no-selftest leaves out: one error, as `envpin probe --quick` on this
    machine gives, before anything is pulled, rendered or allocated."""
    res = run_envpin(*args)
    assert res.code == 2 and res.stdout == "", res
    assert res.stderr.splitlines() == [
        "error: --quick shortens the self-test, which --no-selftest leaves out",
        "hint: drop --quick, or --no-selftest",
    ]


def test_a_python_that_does_not_run_is_one_line_error(cli) -> None:  # type: ignore[no-untyped-def]
    """selftest --python starts the interpreter it is given: /bin/false starts and fails."""
    _one_line_error(cli("selftest", "--quick", "--python", "/bin/false"), "is not a Python 3.6 or later that runs")
