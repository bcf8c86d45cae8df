"""scripts/pythons.sh, which runs the Python versions envpin claims (tests/pythons, tests/unit/test_pythons.py),
is valid bash."""

from __future__ import annotations

import subprocess

from tests.conftest import REPO


def test_pythons_script_is_valid_bash() -> None:
    res = subprocess.run(
        ["bash", "-n", str(REPO / "scripts" / "pythons.sh")], capture_output=True, text=True, check=False, timeout=60
    )
    assert (res.returncode, res.stderr) == (0, "")
