"""Environment folders and probe reports stay transactions across real processes: twenty envpin processes
writing one folder at once, and renders and probes killed with SIGINT at random moments, leave the old folder
or the new one (both reports or neither), never a mix and never a traceback. The in-process cases are
tests/unit/test_transactions.py."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.folders import consistent, leftovers

ENVPIN = str(Path(sys.executable).with_name("envpin"))


def _render(out: Path, tf: str, *extra: str) -> list[str]:
    return [ENVPIN, "render", "--ngc", "20.02", "--tf", tf, "--out", str(out), *extra]


@pytest.mark.slow
@pytest.mark.parametrize("trial", range(3))
def test_twenty_concurrent_writers_end_in_one_consistent_folder(tmp_path: Path, trial: int) -> None:
    out = tmp_path / "env"
    procs = [
        subprocess.Popen(
            _render(out, "2.1" if i % 2 else "1.15"), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        for i in range(20)
    ]
    results = [(p.communicate(timeout=300)[1], p.returncode) for p in procs]
    results = [(code, err) for err, code in results]
    assert all(code == 0 for code, _ in results), [err for code, err in results if code]
    assert consistent(out) is None, consistent(out)
    assert leftovers(tmp_path) == []


def _handler_line() -> int:
    """The line of envpin/__main__.py that installs its SIGINT handler: before it, no envpin code can catch one."""
    text = (Path(__file__).resolve().parents[2] / "envpin" / "__main__.py").read_text()
    return [n for n, line in enumerate(text.splitlines(), 1) if line == "    signal.signal(signal.SIGINT, _stop)"][-1]


def _envpin_traceback(err: str) -> bool:
    """A traceback through envpin's code after it could catch Ctrl-C. Ctrl-C in the interpreter's own start-up
    (site, the console script's first import: about 20 ms) is Python's to report, and so is one raised while
    `envpin/__init__.py` runs or `envpin/__main__.py` has not yet reached the line that installs its handler
    (its frame at line 0 on 3.11+, where a pending signal is raised on entering the module)."""
    if "Traceback" not in err:
        return False
    frames = [line.strip() for line in err.splitlines() if line.strip().startswith("File ")]
    ours = [f for f in frames if "/envpin/" in f]
    if not ours:
        return False

    def before_handler(frame: str) -> bool:
        where, _, rest = frame.partition('", line ')
        number, _, function = rest.partition(", in ")
        if function != "<module>" or not number.isdigit():
            return False
        return where.endswith("/envpin/__init__.py") or (
            where.endswith("/envpin/__main__.py") and int(number) <= _handler_line()
        )

    return not all(before_handler(f) for f in ours)


def test_a_traceback_before_the_handler_is_start_up_and_any_other_envpin_frame_is_not() -> None:
    start_up = (
        'Traceback (most recent call last):\n  File "/v/bin/envpin", line 3, in <module>\n'
        '    from envpin.__main__ import main\n  File "/w/envpin/__main__.py", line 0, in <module>\n'
        "KeyboardInterrupt\n"
    )
    assert not _envpin_traceback(start_up)
    assert not _envpin_traceback(start_up.replace('__main__.py", line 0', '__init__.py", line 12'))
    assert not _envpin_traceback(start_up.replace("line 0, in", "line 1, in"))
    assert _envpin_traceback(start_up.replace("line 0, in <module>", f"line {_handler_line() + 1}, in <module>"))
    assert _envpin_traceback(
        start_up.replace('"/w/envpin/__main__.py", line 0, in <module>', '"/w/envpin/cli/app.py", line 40, in main')
    )
    assert _envpin_traceback(
        start_up.replace('"/w/envpin/__main__.py", line 0, in <module>', '"/w/envpin/__main__.py", line 3, in main')
    )
    assert not _envpin_traceback("interrupted\n")


def _interrupted_render(folder: Path, seed: int, budget: float) -> str | None:
    """One render killed with SIGINT after a random delay; the folder must be old or new, never a mix."""
    rng = random.Random(seed)
    proc = subprocess.Popen(
        _render(folder, rng.choice(("2.1", "1.15")), "--force"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(rng.uniform(0, budget))
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    if _envpin_traceback(err):
        return f"seed {seed}: traceback on SIGINT: {err[-4000:]}"
    problem = consistent(folder)
    return f"seed {seed}: {problem}" if problem else None


@pytest.mark.slow
def test_sigint_at_random_points_never_leaves_a_mixed_folder(tmp_path: Path) -> None:
    """200 renders, each interrupted at a random moment of its run (measured first), four folders at a time."""
    started = time.monotonic()
    assert subprocess.run(_render(tmp_path / "probe-run", "2.1"), capture_output=True).returncode == 0
    budget = (time.monotonic() - started) * 1.2
    folders = [tmp_path / f"env{i}" for i in range(4)]

    def fifty(i: int) -> list[str | None]:  # one thread per folder: checks never race a writer
        return [_interrupted_render(folders[i], i * 50 + n, budget) for n in range(50)]

    with ThreadPoolExecutor(max_workers=4) as pool:
        problems = [p for batch in pool.map(fifty, range(4)) for p in batch]
    assert len(problems) == 200 and [p for p in problems if p] == []
    for folder in folders:  # a last run that is not interrupted cleans whatever staging was left
        assert subprocess.run(_render(folder, "2.1", "--force"), capture_output=True).returncode == 0
        assert consistent(folder) is None
    assert leftovers(tmp_path) == []


@pytest.mark.slow
def test_probe_out_writes_both_reports_or_neither_under_sigint(tmp_path: Path) -> None:
    out = tmp_path / "reports"
    # --no-check-files: the RECORD check reads every installed file (seconds); the writes are what is tested
    cmd = [sys.executable, "-m", "envpin.probe", "--no-selftest", "--no-check-files", "--out", str(out)]
    started = time.monotonic()
    assert subprocess.run(cmd, capture_output=True).returncode == 0
    budget = (time.monotonic() - started) * 1.2
    rng = random.Random(7)
    for _ in range(100):
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0, budget))
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    names = sorted(p.name for p in out.iterdir())
    stems = {n.rsplit(".", 1)[0] for n in names if not n.startswith(".")}
    assert sorted(names) == sorted([*(s + ".json" for s in stems), *(s + ".md" for s in stems)])
    assert len(stems) >= 1
