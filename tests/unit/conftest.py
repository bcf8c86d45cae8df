"""The unit tier runs in-process: a test here that starts a process fails, so the inner loop stays fast and a
test that needs the real console script, another Python or a component says so by living in its tier's folder."""

from __future__ import annotations

import os
import subprocess

import pytest

_WHY = (
    "tests/unit runs in-process only: a test that starts a process belongs in tests/cli (the console script) "
    "or in the folder of the component it needs (tests/tf, tests/pythons, ...)"
)
#: Every way the standard library starts a process: subprocess (and asyncio's, which builds on its Popen),
#: os.fork/os.posix_spawn (multiprocessing), the exec and spawn families, os.system/os.popen.
_OS_STARTS = (
    "fork",
    "forkpty",
    "posix_spawn",
    "posix_spawnp",
    "system",
    "popen",
    "execv",
    "execve",
    "execvp",
    "execvpe",
    "execl",
    "execle",
    "execlp",
    "execlpe",
    "spawnv",
    "spawnve",
    "spawnvp",
    "spawnvpe",
)


def _refuse(*args: object, **kwargs: object) -> None:
    raise AssertionError(_WHY)


@pytest.fixture(autouse=True)
def _in_process_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(subprocess.Popen, "_execute_child", _refuse)
    for name in _OS_STARTS:
        if hasattr(os, name):
            monkeypatch.setattr(os, name, _refuse)
