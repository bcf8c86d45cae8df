"""envpin.probe and envpin.probe.selftest load their public names on first use (envpin.portable.lazy, which reads
their declarations from the source: from the checkout, and from envpin.pyz, where the zip's loader holds it), in a
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
print("ok", probe.__file__)
"""


def loads_lazily(python: str, path: Path = ROOT) -> None:
    """SCRIPT in a fresh `python` with warnings as errors, envpin imported from `path` (the checkout, or an
    envpin.pyz): it prints ok, and where it imported the probe from."""
    out = subprocess.run(
        [python, "-W", "error", "-c", SCRIPT],
        cwd=path if path.is_dir() else path.parent,
        env={"PYTHONPATH": str(path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (out.returncode, out.stdout.split()) == (0, ["ok", str(path / "envpin" / "probe" / "__init__.py")]), (
        out.stderr
    )


def payload_at(folder: Path) -> Path:
    """envpin.pyz as images carry it, written into `folder`."""
    from envpin.environment.payload import PAYLOAD_NAME, payload

    path = folder / PAYLOAD_NAME
    path.write_bytes(payload())
    return path


def test_public_names_load_on_first_use() -> None:
    loads_lazily(sys.executable)


def test_public_names_load_on_first_use_from_the_payload(tmp_path: Path) -> None:
    loads_lazily(sys.executable, payload_at(tmp_path))
