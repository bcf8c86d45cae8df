"""envpin.track's strict mode against a real lock (rendered, its reference recorded from this machine's
probe): an identical environment starts, a changed breaking field is refused by name. Strict mode asks
`envpin verify --report` in a child of this interpreter, so these tests start processes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envpin.environment import lockfile
from envpin.probe import collect, track


@pytest.fixture
def recorded_lock(cli, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    out = tmp_path / "env"
    assert cli("render", "--ngc", "20.02", "--tf", "2.1", "--out", str(out)).code == 0
    lock = out / lockfile.LOCK_NAME
    report = tmp_path / "host.json"
    report.write_text(json.dumps(collect()))
    res = cli("verify", "--lock", str(lock), "--report", str(report), "--record", "--force")
    assert res.code in (0, 1), res.stderr
    return lock


def test_strict_lets_an_identical_environment_start(recorded_lock: Path) -> None:
    run = track.start(seed=7, strict=True, lock=str(recorded_lock))
    lock = lockfile.read(recorded_lock)
    assert run.record["lock"]["inputs_hash"] == lock.inputs_hash
    assert run.record["lock"]["breaking"] == []
    assert run.record["fingerprint"] == lock.expected.fingerprint if lock.expected else False
    assert run.params["envpin.seed"] == "7" and run.params["envpin.strict"] == "True"
    assert run.params["envpin.device_class"].startswith(("cpu:", "gpu:"))


def test_strict_refuses_a_changed_breaking_field_by_name(recorded_lock: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    with pytest.raises(track.DriftError) as caught:
        track.start(strict=True, lock=str(recorded_lock))
    message = str(caught.value)
    assert "env.OMP_NUM_THREADS" in message and "1 breaking field" in message, message
    assert [d["key"] for d in caught.value.differences] == ["env.OMP_NUM_THREADS"]
