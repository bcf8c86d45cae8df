"""envpin diff / verify: classification of differences and the exit-code contract (0 / 1 / 2)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from envpin.probe import collect, fingerprint, fingerprint_fields
from envpin.reports import diff
from tests.conftest import Result


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    return collect()


Cli = Callable[..., Result]


def _probe(cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str, **env: str) -> Path:
    """A real report from the CLI, run in this process with `env` set (the probe reads the environment as it
    runs; tests/cli/test_diff.py compares two separate processes)."""
    path = tmp_path / name
    for key, value in {"OMP_NUM_THREADS": "2", "TF_ENABLE_ONEDNN_OPTS": "1", **env}.items():
        monkeypatch.setenv(key, value)
    res = cli("probe", "-o", str(path))
    assert res.code == 0, res.stderr
    assert res.stderr == "" and "fingerprint sha256:" in res.stdout  # the report went to a file
    return path


def _diff_json(cli: Cli, a: Path, b: Path) -> tuple[int, dict[str, Any]]:
    res = cli("diff", str(a), str(b), "--json")
    assert res.code in (0, 1), res.stderr
    return res.code, json.loads(res.stdout)


def _breaking(doc: dict[str, Any]) -> list[str]:
    return [d["key"] for d in doc["differences"] if d["severity"] == "breaking"]


def test_thread_count_difference_is_breaking(cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    a = _probe(cli, monkeypatch, tmp_path, "a.json", OMP_NUM_THREADS="1")
    b = _probe(cli, monkeypatch, tmp_path, "b.json", OMP_NUM_THREADS="8")
    code, doc = _diff_json(cli, a, b)
    assert code == 1 and _breaking(doc) == ["env.OMP_NUM_THREADS"]
    assert doc["verdict"] == "1 breaking difference"
    assert doc["fingerprint"]["a"] != doc["fingerprint"]["b"]
    assert {d["severity"] for d in doc["differences"] if d["key"] != "env.OMP_NUM_THREADS"} <= {"info"}


def test_onednn_setting_difference_is_breaking(cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    a = _probe(cli, monkeypatch, tmp_path, "a.json", TF_ENABLE_ONEDNN_OPTS="0")
    b = _probe(cli, monkeypatch, tmp_path, "b.json", TF_ENABLE_ONEDNN_OPTS="1")
    code, doc = _diff_json(cli, a, b)
    assert code == 1 and _breaking(doc) == ["env.TF_ENABLE_ONEDNN_OPTS"]


def test_hostname_only_difference_is_info(cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    a = _probe(cli, monkeypatch, tmp_path, "a.json")
    data = json.loads(a.read_text())
    data["host"]["hostname"]["value"] = "another-machine"
    b = tmp_path / "b.json"
    b.write_text(json.dumps(data))
    code, doc = _diff_json(cli, a, b)
    assert code == 0
    assert [(d["key"], d["severity"]) for d in doc["differences"]] == [("host.hostname", "info")]
    assert doc["verdict"] == "identical except informational differences"
    res = cli("diff", str(a), str(b))
    assert res.code == 0 and res.stderr == ""
    assert res.stdout.splitlines()[0] == "identical except informational differences"
    assert "host.hostname" in res.stdout


def _with(report: dict[str, Any], section: str, name: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(report)
    out[section][name] = {"value": value, "source": "test"}
    return out


def _severities(a: dict[str, Any], b: dict[str, Any]) -> dict[str, str]:
    return {d.key: d.severity for d in diff.diff_reports(a, b)}


def _gpu(report: dict[str, Any], driver: str = "550.54.15", name: str = "NVIDIA A100-SXM4-40GB") -> dict[str, Any]:
    out = copy.deepcopy(report)
    out["gpu"] = {
        "backend": {"value": "nvml", "source": "test"},
        "count": {"value": 1, "source": "test"},
        "driver_version": {"value": driver, "source": "test"},
        "driver_major": {"value": driver.split(".")[0], "source": "test"},
        "devices.0.name": {"value": name, "source": "test"},
        "devices.0.compute_capability": {"value": "8.0", "source": "test"},
        "devices.0.uuid": {"value": f"GPU-{driver}", "source": "test"},
    }
    return out


def test_driver_minor_is_risk_and_major_is_breaking(report: dict[str, Any]) -> None:
    base = _gpu(report, "550.54.15")
    assert _severities(base, _gpu(report, "550.90.07")) == {"gpu.driver_version": "risk", "gpu.devices.0.uuid": "info"}
    sev = _severities(base, _gpu(report, "535.104.05"))
    assert sev["gpu.driver_major"] == "breaking" and sev["gpu.driver_version"] == "risk"


def test_gpu_model_is_breaking(report: dict[str, Any]) -> None:
    sev = _severities(_gpu(report), _gpu(report, name="NVIDIA H100 80GB HBM3"))
    assert sev == {"gpu.devices.0.name": "breaking"}


def test_cpu_isa_level_breaks_only_when_computing_on_cpu(report: dict[str, Any]) -> None:
    other = "x86-64-v2" if report["cpu"]["isa_level"].get("value") != "x86-64-v2" else "x86-64-v3"
    assert _severities(report, _with(report, "cpu", "isa_level", other)) == {"cpu.isa_level": "breaking"}
    on_gpu = _gpu(report)
    assert _severities(on_gpu, _with(on_gpu, "cpu", "isa_level", other)) == {"cpu.isa_level": "risk"}
    assert "cpu.isa_level" not in fingerprint_fields(on_gpu)


@pytest.mark.parametrize(
    ("section", "name", "value", "key", "severity"),
    [
        ("os", "kernel", "4.4.0", "os.kernel", "risk"),
        ("container", "runtime", "podman", "container.runtime", "risk"),
        ("env", "XLA_FLAGS", "--xla_gpu_deterministic_ops=true", "env.XLA_FLAGS", "breaking"),
        ("env", "TF_DETERMINISTIC_OPS", "1", "env.TF_DETERMINISTIC_OPS", "breaking"),
        ("env", "PYTHONHASHSEED", "0", "env.PYTHONHASHSEED", "breaking"),
        ("env", "TF_CPP_MIN_LOG_LEVEL", "3", "env.TF_CPP_MIN_LOG_LEVEL", "info"),
        ("cuda", "cudnn", {"version": "8.9.7", "path": "/x"}, "cuda.cudnn.version", "breaking"),
        ("tensorflow", "version", "2.99.0", "tensorflow.version", "breaking"),
        ("packages", "site_hash", "sha256:" + "0" * 64, "packages.site_hash", "breaking"),
    ],
)
def test_field_classes(report: dict[str, Any], section: str, name: str, value: Any, key: str, severity: str) -> None:
    assert _severities(report, _with(report, section, name, value))[key] == severity


def test_package_version_is_breaking(report: dict[str, Any]) -> None:
    other = copy.deepcopy(report)
    dists = other["packages"]["distributions"]["value"]
    name = sorted(dists)[0]
    dists[name] = dists[name] + ".post1"
    assert _severities(report, other) == {f"packages.distributions.{name}": "breaking"}


def test_tf_runtime_threads_breaking_but_probe_mode_is_info(report: dict[str, Any]) -> None:
    runtime = {"version": "2.21.0", "intra_op_threads": 0, "inter_op_threads": 0}
    a = _with(report, "tensorflow", "runtime", runtime)
    b = _with(report, "tensorflow", "runtime", {**runtime, "intra_op_threads": 4})
    assert _severities(a, b) == {"tensorflow.runtime.intra_op_threads": "breaking"}
    plain = copy.deepcopy(report)
    plain["tensorflow"]["runtime"] = {"unavailable": "not imported", "source": "test"}
    assert set(_severities(plain, a).values()) == {"info"}
    assert fingerprint(a) == fingerprint(plain)


def test_tf32_on_and_off_is_breaking_and_leaves_the_fingerprint(report: dict[str, Any]) -> None:
    """TF32 changes float32 matmul and convolution results on Ampere and later GPUs: breaking, named with
    its reason; like every runtime setting it is not hashed, and a report without it (TF < 2.4) is info."""
    runtime = {"version": "2.21.0", "intra_op_threads": 0, "inter_op_threads": 0, "tf32": "on"}
    on = _with(report, "tensorflow", "runtime", runtime)
    off = _with(report, "tensorflow", "runtime", {**runtime, "tf32": "off"})
    assert _severities(on, off) == {"tensorflow.runtime.tf32": "breaking"}
    [found] = [d for d in diff.diff_reports(on, off) if d.key == "tensorflow.runtime.tf32"]
    assert "TensorFloat-32" in found.reason
    older = _with(report, "tensorflow", "runtime", {k: v for k, v in runtime.items() if k != "tf32"})
    assert _severities(older, on) == {"tensorflow.runtime.tf32": "info"}
    assert fingerprint(on) == fingerprint(off)


def test_golden_hash_difference_is_breaking(report: dict[str, Any]) -> None:
    a, b = copy.deepcopy(report), copy.deepcopy(report)
    a["selftest"] = {"golden": {"hash": "sha256:" + "a" * 64, "device_class": "cpu-x"}}
    b["selftest"] = {"golden": {"hash": "sha256:" + "b" * 64, "device_class": "cpu-x"}}
    assert _severities(a, b) == {"golden.cpu-x": "breaking"}


# --- unreadable input: exit 2, one line -------------------------------------------------------------------


def _one_line_error(res: Any, needle: str) -> None:
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert res.code == 2, res.stderr
    assert lines[0].startswith("error: ") and needle in lines[0], res.stderr
    assert len(lines) <= 2 and (len(lines) == 1 or lines[1].startswith("hint: "))
    assert "Traceback" not in res.stderr and res.stdout == ""


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("{", "is not valid JSON"),
        ("[1, 2]", "not a probe report"),
        ('{"hello": 1}', "no probe_schema"),
        ('{"probe_schema": 99}', "probe schema 99"),
        ('{"probe_schema": 1, "cpu": []}', "section 'cpu'"),
        ("\udcff", "cannot read report"),
    ],
)
def test_diff_corrupt_input(cli, tmp_path: Path, report: dict[str, Any], content: str, needle: str) -> None:  # type: ignore[no-untyped-def]
    good = tmp_path / "good.json"
    good.write_text(json.dumps(report))
    bad = tmp_path / "bad.json"
    bad.write_bytes(content.encode("utf-8", "surrogateescape"))
    _one_line_error(cli("diff", str(good), str(bad)), needle)
    _one_line_error(cli("diff", str(bad), str(good), "--json"), needle)


def test_diff_missing_and_unreadable_files(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _one_line_error(cli("diff", str(tmp_path / "nope.json"), str(tmp_path / "nope.json")), "does not exist")
    _one_line_error(cli("diff", str(tmp_path), str(tmp_path)), "cannot read report")


def test_many_differences_become_lines_and_long_values_are_shortened(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Past 200 differences the table is one line per difference (every difference, breaking first); a
    value past 200 characters is shortened with its length, in the table and in the lines."""
    from envpin.views.diff import MAX_CELL, MAX_TABLE_ROWS

    base = json.loads(cli("probe").stdout)
    a, b = json.loads(json.dumps(base)), json.loads(json.dumps(base))
    for i in range(MAX_TABLE_ROWS + 1):
        a["env"][f"TF_MANY_{i}"] = {"value": str(i), "source": "environ:test"}
        b["env"][f"TF_MANY_{i}"] = {"value": str(i + 1), "source": "environ:test"}
    a["env"]["TF_LONG"] = {"value": "x" * 5000, "source": "environ:test"}
    a["fingerprint"], b["fingerprint"] = fingerprint(a), fingerprint(b)  # as a probe records them
    (tmp_path / "a.json").write_text(json.dumps(a))
    (tmp_path / "b.json").write_text(json.dumps(b))
    res = cli("diff", str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    assert res.code == 1
    body = res.stdout.splitlines()[1:]
    assert len(body) == MAX_TABLE_ROWS + 2
    assert "breaking env.TF_MANY_0: a.json 0 -> b.json 1 (" in res.stdout
    long_line = next(line for line in body if "TF_LONG" in line)
    assert "x" * MAX_CELL + "… (5,000 characters; --json shows the whole value) -> b.json (absent)" in long_line
    whole = json.loads(cli("diff", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--json").stdout)
    assert any(d["a"] == "x" * 5000 for d in whole["differences"])


def test_a_recorded_fingerprint_that_is_not_its_fields_is_said_beside_identical(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The fingerprints diff shows are those of the fields it compared, so an "identical" verdict never stands
    beside two different fingerprints; a report whose recorded fingerprint is not that of its fields (edited,
    or written by other fingerprint rules) is named in a note."""
    a = _probe(cli, monkeypatch, tmp_path, "a.json")
    data = json.loads(a.read_text())
    real = data["fingerprint"]
    data["fingerprint"] = "sha256:" + "0" * 64
    b = tmp_path / "b.json"
    b.write_text(json.dumps(data))
    code, doc = _diff_json(cli, a, b)
    note = (
        f"b.json records the fingerprint sha256:{'0' * 64}, but its fields' fingerprint is {real} (the "
        "report was edited, or written with other fingerprint rules)"
    )
    assert code == 0 and doc["verdict"] == "identical" and doc["differences"] == []
    assert doc["fingerprint"] == {"a": real, "b": real}
    assert doc["notes"] == [note]
    res = cli("diff", str(a), str(b))
    assert res.code == 0 and res.stderr == ""
    assert res.stdout.splitlines() == ["identical", note]
    # Reports whose recorded fingerprints are their fields': no note.
    code, doc = _diff_json(cli, a, a)
    assert code == 0 and doc["notes"] == [] and doc["fingerprint"] == {"a": real, "b": real}
