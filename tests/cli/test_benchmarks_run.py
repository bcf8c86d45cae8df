"""Every benchmark still starts: its imports resolve and its options parse (`--help`). The measurements
themselves run by hand (benchmarks/README or each file's docstring), never as timed tests."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO

BENCHMARKS = sorted((REPO / "benchmarks").glob("bench_*.py"))


@pytest.mark.parametrize("path", BENCHMARKS, ids=[p.stem for p in BENCHMARKS])
def test_benchmark_starts(path) -> None:  # type: ignore[no-untyped-def]
    proc = subprocess.run([sys.executable, str(path), "--help"], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "usage" in proc.stdout.lower()
