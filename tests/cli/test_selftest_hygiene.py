"""Seed hygiene across real fresh processes, for the parts that need only the standard library."""

from __future__ import annotations

from pathlib import Path

import pytest

from envpin.probe import hygiene
from tests.unit.test_selftest_hygiene import _by_check, _env, _script


def test_unset_pythonhashseed_changes_set_order_and_is_a_finding() -> None:
    found = _by_check(hygiene.run_hygiene(quick=True, environ=_env()))
    entry = found["PYTHONHASHSEED"]
    assert entry["status"] == "finding"
    assert "unset" in entry["message"] and "set of 32 strings" in entry["message"]
    assert "PYTHONHASHSEED=0" in entry["fix"]


@pytest.mark.parametrize("value", ["0", "12345"])
def test_fixed_pythonhashseed_is_ok(value: str) -> None:
    found = _by_check(hygiene.run_hygiene(quick=True, environ=_env(PYTHONHASHSEED=value)))
    assert found["PYTHONHASHSEED"]["status"] == "ok"
    assert found["PYTHONHASHSEED"]["fix"] == ""
    assert found["rng-seeding"]["status"] == "skipped"


def test_pythonhashseed_random_is_a_finding() -> None:
    found = _by_check(hygiene.run_hygiene(quick=True, environ=_env(PYTHONHASHSEED="random")))
    assert found["PYTHONHASHSEED"]["status"] == "finding"
    assert "'random'" in found["PYTHONHASHSEED"]["message"]


def test_unseeded_python_random_in_a_script_is_found(tmp_path: Path) -> None:
    script = _script(tmp_path, "import random\nprint(random.random())\n")
    found = _by_check(hygiene.run_hygiene(script, environ=_env(PYTHONHASHSEED="0")))
    assert found["python-random"]["status"] == "finding"
    assert "random.seed(SEED)" in found["python-random"]["fix"]
    assert found["PYTHONHASHSEED"]["status"] == "ok"


def test_seeding_from_entropy_counts_as_unseeded(tmp_path: Path) -> None:
    script = _script(tmp_path, "import random\nrandom.seed()\nrandom.random()\n")
    found = _by_check(hygiene.run_hygiene(script, environ=_env(PYTHONHASHSEED="0")))
    assert found["python-random"]["status"] == "finding"


def test_seeded_python_random_is_ok_and_unused_is_said(tmp_path: Path) -> None:
    seeded = _script(tmp_path, "import random\nrandom.seed(7)\nrandom.random()\n")
    found = _by_check(hygiene.run_hygiene(seeded, environ=_env(PYTHONHASHSEED="0")))
    assert found["python-random"]["status"] == "ok"
    assert "is seeded" in found["python-random"]["message"]
    unused = _script(tmp_path, "x = sum(range(10))\n")
    found = _by_check(hygiene.run_hygiene(unused, environ=_env(PYTHONHASHSEED="0")))
    assert found["python-random"]["status"] == "ok"
    assert "was not used" in found["python-random"]["message"]
    assert found["tensorflow-random"]["message"] == "TensorFlow was not imported by the script"


def test_script_gets_its_arguments_and_a_failing_script_is_reported(tmp_path: Path) -> None:
    script = _script(tmp_path, "import sys\nassert sys.argv[1:] == ['--epochs', '3'], sys.argv\nraise SystemExit(0)\n")
    found = hygiene.run_hygiene(script, ["--epochs", "3"], environ=_env(PYTHONHASHSEED="0"))
    assert not [f for f in found if f["check"] == "script"]
    bad = _script(tmp_path, "raise RuntimeError('boom')\n")
    found = _by_check(hygiene.run_hygiene(bad, environ=_env(PYTHONHASHSEED="0")))
    assert found["script"]["status"] == "skipped"
    assert "RuntimeError: boom" in found["script"]["message"]


def test_draws_while_importing_a_library_are_not_the_programs(tmp_path: Path) -> None:
    # Like rich (imported by Keras 3) taking `count(getrandbits(24))` for its style ids at import time.
    (tmp_path / "somelib.py").write_text("import random\n_ids = random.getrandbits(24)\n")
    script = _script(tmp_path, "import somelib\nprint(somelib._ids is not None)\n")
    found = _by_check(hygiene.run_hygiene(script, environ=_env(PYTHONHASHSEED="0")))
    assert found["python-random"]["status"] == "ok"
    assert "only while modules were being imported (1 draw(s)" in found["python-random"]["message"]
    script = _script(tmp_path, "import somelib, random\nx = random.random()\n")
    found = _by_check(hygiene.run_hygiene(script, environ=_env(PYTHONHASHSEED="0")))
    assert found["python-random"]["status"] == "finding"
    assert found["python-random"]["message"].endswith(f"first draw at {script}:2")
