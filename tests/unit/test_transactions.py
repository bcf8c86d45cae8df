"""Environment folders and probe reports are written as transactions: a reader, a Ctrl-C or a second envpin
sees the old folder or the new one, never a mix, and staging left by a killed writer goes on the next run.
Concurrent writers and SIGINT, which need processes of their own: tests/cli/test_transactions.py."""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

import pytest

from envpin.environment.lockfile import LOCK_NAME, read
from envpin.errors import EnvpinError
from envpin.files import write as fswrite
from tests.folders import leftovers


def test_re_render_swaps_the_whole_folder_and_keeps_what_force_keeps(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "env"
    assert cli("render", "--ngc", "20.02", "--tf", "2.1", "--out", str(out)).code == 0
    inode = out.stat().st_ino
    (tmp_path / "elsewhere").mkdir()
    (out / "notes.txt").write_text("mine")
    (out / "linked").symlink_to(tmp_path / "elsewhere")
    refused = cli("render", "--ngc", "20.02", "--tf", "1.15", "--out", str(out))
    assert refused.code == 2 and "was not written by envpin" in refused.stderr
    assert out.stat().st_ino == inode  # refused before anything was staged
    forced = cli("render", "--ngc", "20.02", "--tf", "1.15", "--out", str(out), "--force")
    assert forced.code == 0, forced.stderr
    assert out.stat().st_ino != inode  # a new folder was swapped in
    assert (out / "notes.txt").read_text() == "mine"
    assert (out / "linked").is_symlink() and os.readlink(out / "linked") == str(tmp_path / "elsewhere")
    assert list((tmp_path / "elsewhere").iterdir()) == []  # nothing was written through the link
    assert read(out / LOCK_NAME).inputs.tf_version == "1.15"
    assert leftovers(tmp_path) == []


def test_a_linked_environment_folder_stays_a_link(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    real = tmp_path / "real"
    assert cli("render", "--ngc", "20.02", "--tf", "2.1", "--out", str(real)).code == 0
    (tmp_path / "link").symlink_to(real)
    assert cli("render", "--ngc", "20.02", "--tf", "1.15", "--out", str(tmp_path / "link")).code == 0
    assert (tmp_path / "link").is_symlink()
    assert read(real / LOCK_NAME).inputs.tf_version == "1.15"


def test_staging_left_by_a_killed_writer_is_removed_by_the_next(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "env"
    for name in (".env.envpin-new-abc123", ".env.envpin-old-def456"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "Dockerfile").write_text("half")
    (tmp_path / ".other.envpin-new-x").mkdir()  # another folder's staging: not this writer's to remove
    assert cli("render", "--ngc", "20.02", "--tf", "2.1", "--out", str(out)).code == 0
    assert leftovers(tmp_path) == [".other.envpin-new-x"]


def test_a_second_writer_waits_then_says_another_envpin_is_writing(tmp_path: Path) -> None:
    out = tmp_path / "env"
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        started = time.monotonic()
        with (
            pytest.raises(EnvpinError, match="another envpin is writing in") as info,
            fswrite.exclusive(out, wait=0.3),
        ):
            pass
        assert time.monotonic() - started >= 0.3
        assert info.value.hint and "advisory lock" in info.value.hint
    finally:
        os.close(fd)
    with fswrite.exclusive(out, wait=0.3):
        pass  # free again


def test_replace_folder_leaves_the_target_untouched_when_staging_fails(tmp_path: Path) -> None:
    target = tmp_path / "env"
    target.mkdir()
    (target / "a").write_text("old")
    with pytest.raises(EnvpinError, match="cannot write"), fswrite.exclusive(target):
        fswrite.replace_folder(target, {"a": b"new", "a/b": b"a file cannot be a folder"})
    assert (target / "a").read_text() == "old"
    assert leftovers(tmp_path) == []
