"""envpin study supervises the runs it starts, through the real console script: SIGTERM and SIGINT to envpin's
own pid stop every run under way with everything it started and remove the work folder (exit 143 and 130, one
line), and a process a run leaves running in the background is stopped when the run ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

#: Two processes per run, their pids written down: a background sleep and the shell waiting on its own.
SCRIPT = 'sleep 300 &\necho $! >> "$ENVPIN_TEST_PIDS"\necho $$ >> "$ENVPIN_TEST_PIDS"\n{tail}\n'


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def _pids(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def _start(tmp_path: Path, tail: str, *args: str) -> tuple[subprocess.Popen[str], Path, Path]:
    script, pids, work = tmp_path / "train.sh", tmp_path / "pids", tmp_path / "tmp"
    script.write_text(SCRIPT.format(tail=tail))
    work.mkdir()
    env = dict(os.environ, ENVPIN_TEST_PIDS=str(pids), TMPDIR=str(work))
    envpin = Path(sys.executable).with_name("envpin")
    proc = subprocess.Popen(
        [str(envpin), "study", *args, "--", "sh", str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    return proc, pids, work


def _gone(pids: list[int], seconds: float = 10.0) -> list[int]:
    """The pids still alive after up to `seconds` (an orphan is reaped by init a moment after it dies)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if _alive(p)]


@pytest.mark.parametrize(
    ("signum", "code", "line"), [(signal.SIGTERM, 143, "terminated (SIGTERM)"), (signal.SIGINT, 130, "interrupted")]
)
def test_a_signal_to_envpin_stops_every_run_and_its_children(tmp_path: Path, signum: int, code: int, line: str) -> None:
    proc, pids, work = _start(tmp_path, "sleep 300", "-n", "2", "-j", "2")
    try:
        deadline = time.monotonic() + 60
        while len(_pids(pids)) < 4 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert len(_pids(pids)) == 4, proc.communicate(timeout=30)
        proc.send_signal(signum)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in _pids(pids):
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
    assert proc.returncode == code, err
    assert err.strip().splitlines()[-1] == line and "Traceback" not in err, err
    assert _gone(_pids(pids)) == []
    assert list(work.iterdir()) == []  # the work folder went with the runs


def test_a_process_a_run_leaves_in_the_background_is_stopped_when_it_ends(tmp_path: Path) -> None:
    proc, pids, _work = _start(tmp_path, "echo loss=0.5", "-n", "2")
    try:
        proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
        left = _gone(_pids(pids))
        for pid in left:
            os.kill(pid, signal.SIGKILL)
    assert len(_pids(pids)) >= 4 and left == []  # study runs fixed-seed and varied-seed runs
