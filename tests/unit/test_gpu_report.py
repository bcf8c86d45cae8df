"""Reports the standard-library probe wrote on a real GPU host (one NVIDIA H200, NVML through ctypes, Python
3.12, no TensorFlow; tests/gpu_reports/README.md): the host side reads them as the probe wrote them (the CLI
in-process)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from envpin.probe.fields import device_class, fingerprint, fingerprint_fields
from tests.conftest import REPO

REPORTS = REPO / "tests" / "gpu_reports"
REPORT = REPORTS / "h200-nvml.json"
NO_SELFTEST = REPORTS / "h200-nvml-noselftest.json"


def _load(path: Path) -> dict:  # type: ignore[type-arg]
    return json.loads(path.read_text(encoding="utf-8"))


def test_the_fingerprint_recomputed_on_the_host_is_the_one_the_gpu_host_wrote() -> None:
    for path in (REPORT, NO_SELFTEST):
        report = _load(path)
        assert fingerprint(report) == report["fingerprint"]
    assert _load(REPORT)["fingerprint"] == _load(NO_SELFTEST)["fingerprint"]  # the self-test is not fingerprinted


def test_the_gpu_fields_that_change_results_are_fingerprinted() -> None:
    report = _load(REPORT)
    fields = fingerprint_fields(report)
    assert fields["gpu.devices.0.name"] == "NVIDIA H200"
    assert fields["gpu.devices.0.compute_capability"] == "9.0"
    assert fields["gpu.count"] == "1" and fields["gpu.driver_major"] == "580"
    assert fields["gpu.cuda_driver_version"] == "13.0"
    assert "gpu.devices.0.uuid" not in fields and "gpu.devices.0.pci_bus_id" not in fields  # this card, not its kind
    assert device_class(report) == "gpu:NVIDIA H200;cc=9.0;count=1"
    assert report["gpu"]["backend"]["value"] == "nvml"
    assert "TensorFlow is not installed" in report["selftest"]["skipped"]


def test_diff_of_two_runs_on_the_gpu_host_is_identical_but_for_informational_fields(cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("diff", str(REPORT), str(NO_SELFTEST), "--format", "json")
    doc = json.loads(res.stdout)
    assert res.code == 0 and doc["counts"]["breaking"] == 0 and doc["counts"]["risk"] == 0
    assert {d["key"] for d in doc["differences"]} == {
        "host.pid",
        "host.uptime_s",
        "probe.duration_s",
        "probe.options.selftest",
    }


def test_diff_against_a_cpu_host_names_every_gpu_field_as_breaking(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cpu = tmp_path / "cpu.json"
    assert cli("probe", "--no-selftest", "-o", str(cpu)).code == 0
    res = cli("diff", str(cpu), str(REPORT), "--format", "json")
    doc = json.loads(res.stdout)
    breaking = {d["key"] for d in doc["differences"] if d["severity"] == "breaking"}
    assert res.code == 1
    assert {"gpu.count", "gpu.devices.0.name", "gpu.devices.0.compute_capability", "gpu.driver_major"} <= breaking


def test_fleet_report_puts_both_runs_in_one_class(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    shutil.copy(REPORT, tmp_path / "gpu-a.json")
    shutil.copy(NO_SELFTEST, tmp_path / "gpu-b.json")
    res = cli("fleet", "report", str(tmp_path), "--format", "json")
    doc = json.loads(res.stdout)
    assert res.code == 0 and doc["status"] == "consistent"
    assert doc["counts"]["classes"] == 1 and doc["counts"]["nodes"] == 2 and doc["counts"]["breaking"] == 0


def test_the_terminal_summary_of_a_gpu_report() -> None:
    """What `envpin probe` shows a person (stdout a terminal) of a GPU host's report: the device class, the
    GPU and its driver, what CUDA loaded, and "not found" for what the host lacks (no TensorFlow there)."""
    from envpin.views.probe import summary_rows

    rows = dict(summary_rows(_load(REPORT)))
    assert list(rows) == [
        "device", "host", "os", "cpu", "memory", "gpus", "cuda", "python", "tensorflow", "packages", "errors",
    ]  # fmt: skip
    assert rows["device"] == "gpu:NVIDIA H200;cc=9.0;count=1"
    assert rows["gpus"] == "1 (NVIDIA H200), driver 580.159.04"
    assert rows["cuda"] == "runtime 13.0, cuDNN 9.14.0, NCCL 2.28.3"
    assert rows["tensorflow"] == "not found" and rows["host"] == "<host>, in a docker container"  # anonymized
    assert rows["errors"] == ", ".join(_load(REPORT)["probe"]["errors"]["value"])
