"""The one device-class rule, as the self-test builds it and as the fingerprint side applies it to a report."""

from __future__ import annotations

from envpin.portable import device
from envpin.probe import fields


def test_gpu_class_is_model_compute_capability_and_count() -> None:
    assert device.device_class([("NVIDIA A100", "8.0"), ("NVIDIA A100", "8.0")], "", "", "", "") == (
        "gpu:NVIDIA A100;cc=8.0;count=2"
    )
    assert device.device_class([("B", "9.0"), ("A", "")], "", "", "", "") == "gpu:A;cc=unknown|B;cc=9.0;count=2"


def test_report_side_uses_the_same_rule() -> None:
    flat = {"cpu.isa_level": "x86-64-v3", "env.TF_NUM_INTRAOP_THREADS": "2", "env.TF_ENABLE_ONEDNN_OPTS": "0"}
    assert device.from_flat(flat) == "cpu:x86-64-v3;intra_op=2;inter_op=default;onednn=off"
    gpu = {"gpu.devices.0.name": "H100", "gpu.devices.0.compute_capability": "9.0"}
    assert device.from_flat(gpu) == device.device_class([("H100", "9.0")], "", "", "", "")


def test_the_self_tests_own_class_wins() -> None:
    report = {
        "selftest": {
            "golden": {"hash": "sha256:" + "1" * 64, "device_class": "cpu:x86-64-v4;intra_op=1;inter_op=1;onednn=on"}
        }
    }
    assert fields.device_class(report) == "cpu:x86-64-v4;intra_op=1;inter_op=1;onednn=on"


def test_what_tensorflow_reported_outranks_the_rule() -> None:
    """A probe run with TensorFlow imported records TensorFlow's own oneDNN answer and live thread counts;
    those win over the environment and the CPU-feature rule (which cannot see every way to switch them)."""
    flat = {
        "cpu.isa_level": "x86-64-v4",
        "cpu.flags": "avx512f avx512_vnni",
        "os.arch": "x86_64",
        "tensorflow.version": "2.21.0",
        "cpu.affinity_cpus": "2",
    }
    assert device.from_flat(flat) == "cpu:x86-64-v4;intra_op=2;inter_op=2;onednn=on"  # the rule: VNNI -> on
    live = {
        **flat,
        "tensorflow.runtime.onednn": "off",
        "tensorflow.runtime.intra_op_threads": "1",
        "tensorflow.runtime.inter_op_threads": "0",
    }
    assert device.from_flat(live) == "cpu:x86-64-v4;intra_op=1;inter_op=2;onednn=off"
    failed = {**flat, "tensorflow.runtime.onednn": "error: ImportError"}
    assert device.from_flat(failed).endswith("onednn=on")


def test_the_documented_onednn_rule() -> None:
    """tensorflow/core/util/port.cc: default on from TF 2.9 on x86-64 with VNNI/BF16/AMX; Arm Neoverse V1 is
    recognised by its CPU id, which the rule cannot see, so aarch64 stays 'unknown' until TensorFlow says."""
    assert device.onednn_default("2.21.0", ["avx2", "avx512f"], "x86_64") == "off"
    assert device.onednn_default("2.21.0", ["avx2", "avx_vnni"], "x86_64") == "on"
    assert device.onednn_default("2.8.4", ["avx512_vnni"], "x86_64") == "off"
    assert device.onednn_default("2.21.0", [], "aarch64") == "unknown"
    assert device.onednn_default("2.8.0", [], "aarch64") == "off"
    assert device.onednn_default(None, ["amx_tile"], "x86_64") == "unknown"
