"""`verify` compares like with like: `--record` refuses a report whose environment contradicts the lock (unless
--force), the first line says what was compared with what, and this machine is verified only on purpose."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from envpin.environment import lockfile
from envpin.probe import collect
from tests.conftest import said
from tests.unit.lock_reports import as_lock_image


@pytest.fixture(scope="module")
def host_report() -> dict[str, Any]:
    return collect()


@pytest.fixture
def lock(cli, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    out = tmp_path / "env"
    assert cli("render", "--ngc", "20.02", "--tf", "2.1", "--out", str(out)).code == 0
    return out / lockfile.LOCK_NAME


def _write(tmp_path: Path, name: str, report: dict[str, Any]) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(report))
    return path


def _set(report: dict[str, Any], section: str, key: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(report)
    out[section][key] = {"value": value, "source": "test"}
    return out


def test_record_refuses_a_probe_of_the_host_naming_the_fields(  # type: ignore[no-untyped-def]
    cli, lock: Path, tmp_path: Path, host_report: dict[str, Any]
) -> None:
    """Regression: a probe of the host was recorded as the reference of the 20.02 image."""
    before = lock.read_bytes()
    report = _write(tmp_path, "host.json", host_report)
    res = cli("verify", "--lock", str(lock), "--report", str(report), "--record")
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert res.code == 2 and res.stdout == "" and len(lines) == 2, res.stderr
    assert lines[0].startswith(f"error: report {report} does not come from the environment {lock} describes")
    for field in ("image.envpin_plan is absent", "env.TF_DETERMINISTIC_OPS is not set, but the recipe sets '1'"):
        assert field in lines[0]
    assert lines[1] == (
        f"hint: record a probe of the lock's image (`envpin verify --lock {lock} --record` probes it), "
        "or add --force to record it anyway"
    )
    assert lock.read_bytes() == before

    forced = cli("verify", "--lock", str(lock), "--report", str(report), "--record", "--force")
    assert forced.code == 0, forced.stderr
    err = forced.stderr.splitlines()
    assert err[0] == f"verify: report {report} against the reference of {lock}"
    assert "warning: recorded although image.envpin_plan is absent" in err[1]
    assert any(line.startswith("recorded: expected fingerprint sha256:") for line in err)
    assert lockfile.read(lock).expected is not None


@pytest.mark.parametrize(
    ("section", "key", "value", "named"),
    [
        ("tensorflow", "version", "1.15.5", "tensorflow.version is '1.15.5', but the lock is for TensorFlow 2.1"),
        ("cuda", "runtime", {"version": "11.0"}, "cuda.runtime.version is '11.0', but the catalog's cuda is '10.2.89'"),
        ("env", "TF_DETERMINISTIC_OPS", "0", "env.TF_DETERMINISTIC_OPS is '0', but the recipe sets '1'"),
        ("env", "TF_CUDNN_USE_AUTOTUNE", "0", "env.TF_CUDNN_USE_AUTOTUNE is set ('0'), but the recipe unsets it"),
    ],
)
def test_record_names_each_contradiction(  # type: ignore[no-untyped-def]
    cli, lock: Path, tmp_path: Path, host_report: dict[str, Any], section: str, key: str, value: Any, named: str
) -> None:
    image = as_lock_image(host_report, lock)
    ok = _write(tmp_path, "image.json", image)
    assert lockfile.read(lock).contradictions(image, lockfile.plan_of(lockfile.read(lock), lock.parent)) == []
    bad = _write(tmp_path, "bad.json", _set(image, section, key, value))
    res = cli("verify", "--lock", str(lock), "--report", str(bad), "--record")
    assert res.code == 2 and named in res.stderr and "image.envpin_plan" not in res.stderr, res.stderr
    assert cli("verify", "--lock", str(lock), "--report", str(ok), "--record").code == 0


def test_record_refuses_an_image_of_other_inputs(  # type: ignore[no-untyped-def]
    cli, lock: Path, tmp_path: Path, host_report: dict[str, Any]
) -> None:
    image = as_lock_image(host_report, lock)
    other = copy.deepcopy(image)
    other["image"]["envpin_plan"]["value"]["sha256"] = "sha256:" + "e" * 64
    other["image"]["envpin_plan"]["value"]["base_digest"] = "sha256:" + "f" * 64
    res = cli("verify", "--lock", str(lock), "--report", str(_write(tmp_path, "o.json", other)), "--record")
    assert res.code == 2 and "image.envpin_plan.sha256 is 'sha256:eeee" in res.stderr, res.stderr


def test_host_is_verified_only_on_purpose_and_says_so(  # type: ignore[no-untyped-def]
    cli, lock: Path, tmp_path: Path, host_report: dict[str, Any]
) -> None:
    report = _write(tmp_path, "image.json", as_lock_image(host_report, lock))
    assert cli("verify", "--lock", str(lock), "--report", str(report), "--record").code == 0
    res = cli("verify", "--lock", str(lock), "--host", "--json")
    assert res.code in (0, 1), res.stderr
    first = f"verify: this machine (--host: the host, not the lock's image) against the reference of {lock}"
    # Under load the RECORD check may print its progress first: the verdict's first line follows it.
    assert said(res.stderr)[0] == first, res.stderr
    doc = json.loads(res.stdout)
    assert doc["compared"] == first and doc["report"] == "host"
    # The host is no reference either: recording it is refused like any other contradicting report.
    again = cli("verify", "--lock", str(lock), "--host", "--record")
    assert again.code == 2 and "error: this machine (--host" in again.stderr


def test_without_a_report_the_lock_s_image_is_needed(
    cli,
    lock: Path,
    tmp_path: Path,  # type: ignore[no-untyped-def]
    host_report: dict[str, Any],
) -> None:
    """No build of the lock on this machine: a clear error and the build that makes one, before any engine."""
    report = _write(tmp_path, "image.json", as_lock_image(host_report, lock))
    assert cli("verify", "--lock", str(lock), "--report", str(report), "--record").code == 0
    for args in (("verify", "--lock", str(lock)), ("verify", "--lock", str(lock), "--record")):
        res = cli(*args)
        lines = [line for line in res.stderr.splitlines() if line.strip()]
        assert res.code == 2 and res.stdout == "" and len(lines) == 2, res.stderr
        assert lines[0].startswith(f"error: no image of {lock} was built on this machine")
        assert lines[1] == (
            f"hint: build it with `envpin build --lock {lock}`, or compare a report (--report FILE) "
            "or this machine (--host) instead"
        )
