"""tfchild.run_child's limits on real processes: CPU seconds for a child that computes, wall time (4x) for
one that waits; either is a ChildTimeout with what it used, never a crash or a hang."""

from __future__ import annotations

import os
from pathlib import Path

from envpin.probe import tfchild


def _module(tmp_path: Path, name: str, body: str) -> dict[str, str]:
    (tmp_path / f"{name}.py").write_text(body)
    return dict(os.environ, PYTHONPATH=str(tmp_path))


def test_a_child_that_computes_is_stopped_by_its_cpu_limit(tmp_path: Path) -> None:
    env = _module(tmp_path, "spin", "while True:\n    pass\n")
    payload, error, seconds = tfchild.run_child("spin", [], env, timeout=1.0)
    assert payload is None and isinstance(error, tfchild.ChildTimeout)
    assert error.cpu >= 1.0 and seconds < 4.0 * 1.0 + 2
    assert str(error).startswith("spin ran out of time after ")


def test_a_child_that_waits_is_stopped_by_the_wall_limit(tmp_path: Path) -> None:
    env = _module(tmp_path, "wait", "import time\ntime.sleep(600)\n")
    payload, error, seconds = tfchild.run_child("wait", [], env, timeout=0.5)
    assert payload is None and isinstance(error, tfchild.ChildTimeout)
    assert error.cpu < 0.5 <= 4 * 0.5 <= seconds < 10


def test_a_child_that_finishes_in_time_gives_its_payload(tmp_path: Path) -> None:
    env = _module(tmp_path, "quick", "print('noise')\nprint('{\"ok\": 1}')\n")
    payload, error, _seconds = tfchild.run_child("quick", [], env, timeout=30.0)
    assert payload == {"ok": 1} and error is None
