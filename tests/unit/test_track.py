"""envpin.track's start record, strict mode without a lock, and the weights hash (in-process; strict mode
against a real lock asks `envpin verify` in a child: tests/cli/test_track_strict.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from envpin.probe import track


def test_importing_the_callback_imports_no_keras() -> None:
    import envpin.keras  # noqa: F401

    assert "keras" not in sys.modules or "tensorflow" in sys.modules  # only what the test session already had


def test_strict_from_the_environment_and_without_a_lock(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ENVPIN_STRICT", "1")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(track.DriftError, match=r"no envpin\.lock found"):
        track.start()
    monkeypatch.delenv("ENVPIN_STRICT")
    run = track.start()
    assert run.record["lock"]["path"] is None and "envpin.lock.inputs_hash" not in run.params


def test_finish_hashes_the_weights_as_the_golden_run_does() -> None:
    np = pytest.importorskip("numpy")
    from envpin.probe.golden import weights_digest

    weights = [np.arange(6, dtype="float32").reshape(2, 3)]
    run = track.start()
    assert run.finish(weights=weights) == {"weights_hash": weights_digest(weights)}
