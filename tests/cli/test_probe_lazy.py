"""envpin.probe and envpin.probe.selftest load their public names on first use (one LazyPackage for both), in a
fresh interpreter (this one here; the oldest Python the probe supports in tests/pythons/test_probe_lazy.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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


def loads_lazily(python: str) -> None:
    """SCRIPT in a fresh `python` with warnings as errors: it prints ok."""
    out = subprocess.run(
        [python, "-W", "error", "-c", SCRIPT],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (out.returncode, out.stdout.strip()) == (0, "ok"), out.stderr


def test_public_names_load_on_first_use() -> None:
    loads_lazily(sys.executable)
