"""scripts/gpu-selftest.sh: what a GPU machine runs; its usage errors, and the probe step it always runs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO

SCRIPT = REPO / "scripts" / "gpu-selftest.sh"


def test_without_an_output_folder_it_says_how_to_call_it() -> None:
    proc = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "error: no output folder given",
        "hint: bash scripts/gpu-selftest.sh OUT_DIR [PYTHON]",
    ]


def test_a_python_without_tensorflow_still_gets_the_probe(tmp_path: Path) -> None:
    """Python 3.6 from pyenv has no TensorFlow: the probe runs, the self-test step says why it did not."""
    py36 = Path.home() / ".pyenv" / "versions" / "3.6.15" / "bin" / "python3"
    if not py36.exists():
        pytest.skip(f"needs CPython 3.6 at {py36} (pyenv)")
    py = str(py36)
    proc = subprocess.run(["bash", str(SCRIPT), str(tmp_path), py], capture_output=True, text=True, timeout=300)
    summary = (tmp_path / "summary.txt").read_text().splitlines()
    assert summary[1] == "probe (no self-test): exit 0", proc.stderr[-2000:]
    report = json.loads((tmp_path / "probe.json").read_text())
    assert "distributed" in report and "selftest" not in report
    assert proc.returncode == 0
    assert summary[-1] == f"multi-replica self-test not run: {py} cannot import tensorflow"
