"""What tests of written environment folders check (tests/unit and tests/cli test_transactions.py): one whole
render or nothing, and no staging left behind."""

from __future__ import annotations

from pathlib import Path

from envpin.api import check_lock
from envpin.environment.lockfile import LOCK_NAME, read


def consistent(out: Path) -> str | None:
    """None when `out` is absent or one whole render (its lock matches every file and nothing else is
    there); else what is wrong."""
    if not out.exists():
        return None
    if not (out / LOCK_NAME).exists():
        return f"{out} has no lock: {sorted(p.name for p in out.iterdir())}"
    problems = check_lock(out / LOCK_NAME)
    if problems:
        return "; ".join(problems)
    tf = read(out / LOCK_NAME).inputs.tf_version
    if f"TensorFlow {tf}" not in (out / "Dockerfile").read_text():
        return f"Dockerfile is not the one for TensorFlow {tf}"
    return None


def leftovers(parent: Path) -> list[str]:
    """Staging folders and temporary files a writer left in `parent`."""
    return sorted(p.name for p in parent.iterdir() if ".envpin-" in p.name or p.name.endswith(".tmp"))
