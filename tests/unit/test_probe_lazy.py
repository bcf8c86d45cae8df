"""envpin.probe and envpin.probe.selftest load their public names on first use (one LazyPackage for both), under
the oldest Python the probe supports and under this one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.test_pythons import find_python

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """
import sys
import envpin.probe as probe, envpin.probe.selftest as selftest
loaded = sorted(m for m in ("envpin.probe.report", "envpin.probe.fields", "envpin.probe.selftest.run",
                            "envpin.probe.selftest.battery") if m in sys.modules)
assert not loaded, loaded
assert probe.fingerprint.__module__ == "envpin.probe.fields" and "fingerprint" in vars(probe)
assert selftest.classify_exception.__module__ == "envpin.probe.selftest.compare"
assert "collect" in dir(probe) and "problems" in dir(selftest)
import envpin.probe.selftest.battery
assert callable(selftest.battery)  # the function, not the module of the same name
for package in (probe, selftest):
    try:
        package.no_such_name
    except AttributeError as exc:
        assert "has no attribute 'no_such_name'" in str(exc), exc
    else:
        raise AssertionError("no AttributeError")
print("ok")
"""


@pytest.mark.parametrize("minor", [None, pytest.param("3.6", marks=pytest.mark.pythons)], ids=["this", "3.6"])
def test_public_names_load_on_first_use(minor: str | None) -> None:
    python = find_python(minor) if minor else sys.executable
    if python is None:
        pytest.skip(f"no CPython {minor} on this machine (pyenv install {minor}, or put python{minor} on PATH)")
    out = subprocess.run(
        [python, "-W", "error", "-c", SCRIPT],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (out.returncode, out.stdout.strip()) == (0, "ok"), out.stderr
