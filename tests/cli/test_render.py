"""Rendering across processes: the same bytes under any hash seed, and a full disk that leaves nothing behind
(a real tmpfs, mounted for the test). The rest of rendering is tests/unit/test_render.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, run_envpin


def _digest_of_render(seed: str) -> str:
    code = (
        "import hashlib; from envpin.environment.plan import make_plan; from envpin.environment.render import render;"
        "f = render(make_plan(ngc='21.06', tf='2'));"
        "print(hashlib.sha256(b''.join(k.encode() + v for k, v in sorted(f.items()))).hexdigest())"
    )
    env = {**os.environ, "PYTHONHASHSEED": seed}
    return subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True, check=True
    ).stdout


def test_render_is_byte_deterministic_across_hash_seeds() -> None:
    assert _digest_of_render("1") == _digest_of_render("4242")


@pytest.fixture
def tiny_disk(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A 64 KiB tmpfs: a real full disk (needs root and mount permission, as on CI's machine)."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    yield mnt
    subprocess.run(["umount", str(mnt)], check=False)


def test_full_disk_leaves_nothing_behind(tiny_disk: Path) -> None:
    out = tiny_disk / "env"
    res = run_envpin("render", "--ngc", "20.02", "--tf", "2.1", "--out", str(out))
    assert res.code == 2 and "disk is full" in res.stderr and "Traceback" not in res.stderr
    leftovers = [p for p in tiny_disk.rglob("*") if p.is_file()]
    assert leftovers == []
