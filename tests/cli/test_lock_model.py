"""The lock's inputs hash from an installed copy of envpin, in a fresh interpreter: the payload's own bytes are
one of its inputs. The lock model itself is tests/unit/test_lock_model.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO


def test_payload_is_part_of_the_inputs_hash(tmp_path: Path) -> None:
    """Regression: editing a probe source in an installed copy changes inputs_hash and the image tag."""
    site = tmp_path / "site"
    shutil.copytree(REPO / "envpin", site / "envpin", ignore=shutil.ignore_patterns("__pycache__"))
    code = "from envpin.environment.plan import make_plan; print(make_plan(ngc='20.02', tf='2.1').inputs_hash)"
    env = {**os.environ, "PYTHONPATH": str(site)}

    def inputs_hash() -> str:
        return subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, cwd=tmp_path
        ).stdout.strip()

    before = inputs_hash()
    cpu = site / "envpin" / "probe" / "cpu.py"
    cpu.write_text(cpu.read_text() + "\n# a local edit\n")
    after = inputs_hash()
    assert before.startswith("sha256:") and after.startswith("sha256:") and before != after
