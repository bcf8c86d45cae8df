"""Device classes, the oneDNN default rule, and `envpin selftest`'s usage errors (the self-test where TensorFlow
cannot be imported: tests/cli/test_selftest_device.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from envpin.portable import device
from envpin.probe import deviceclass

V3 = [
    "lm",
    "cmov",
    "cx8",
    "fpu",
    "fxsr",
    "mmx",
    "sse",
    "sse2",
    "cx16",
    "lahf_lm",
    "popcnt",
    "sse4_1",
    "sse4_2",
    "ssse3",
    "avx",
    "avx2",
    "bmi1",
    "bmi2",
    "f16c",
    "fma",
    "abm",
    "movbe",
    "xsave",
]
V4 = [*V3, "avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"]


def test_cpu_isa_level_and_onednn_relevant_features() -> None:
    assert deviceclass.cpu_isa(V3, "x86_64") == "x86-64-v3"
    assert deviceclass.cpu_isa([*V4, "amx_tile", "avx512_vnni"], "x86_64") == "x86-64-v4+avx512_vnni+amx_tile"
    assert deviceclass.cpu_isa(["fp", "asimd", "sve"], "aarch64") == "aarch64+asimd+sve"


def test_cpu_device_class_holds_threads_and_onednn() -> None:
    env = {"TF_ENABLE_ONEDNN_OPTS": "0", "TF_NUM_INTRAOP_THREADS": "4"}
    cls = deviceclass.device_class(gpus=[], environ=env, cpu="x86-64-v3")
    assert cls == f"cpu:x86-64-v3;intra_op=4;inter_op={deviceclass.usable_cpus()};onednn=off"
    assert deviceclass.device_class(gpus=[], intra_op=1, inter_op=1, onednn="on", cpu="x86-64-v4") == (
        "cpu:x86-64-v4;intra_op=1;inter_op=1;onednn=on"
    )


def test_gpu_device_class_is_model_compute_capability_and_count() -> None:
    gpus = [("NVIDIA A100-SXM4-80GB", "8.0")] * 2
    assert deviceclass.device_class(gpus=gpus, intra_op=1) == "gpu:NVIDIA A100-SXM4-80GB;cc=8.0;count=2"


VNNI = [*V4, "avx512_vnni"]


@pytest.mark.parametrize(
    ("version", "env", "machine", "flags", "expected"),
    [
        ("2.21.0", {}, "x86_64", VNNI, "on"),
        ("2.9.0", {}, "x86_64", [*V3, "amx_tile"], "on"),
        ("2.21.0", {}, "x86_64", V4, "off"),  # AVX-512 without VNNI/BF16/AMX: TensorFlow keeps oneDNN off
        ("2.21.0", {}, "x86_64", V3, "off"),
        ("2.8.4", {}, "x86_64", VNNI, "off"),
        ("2.7.4", {"TF_ENABLE_ONEDNN_OPTS": "1"}, "x86_64", V3, "on"),
        ("2.21.0", {"TF_ENABLE_ONEDNN_OPTS": "0"}, "x86_64", VNNI, "off"),
        ("2.21.0", {}, "aarch64", ["asimd", "bf16"], "unknown"),  # Neoverse V1 is on, by CPU id: TF must say
    ],
)
def test_onednn_setting(version: str, env: dict, machine: str, flags: list[str], expected: str) -> None:
    assert deviceclass.onednn_setting(version, env, machine, flags) == expected


def test_report_side_builds_the_self_tests_class_from_the_same_readings() -> None:
    flat = {
        "os.arch": "x86_64",
        "cpu.isa_level": "x86-64-v3",
        "cpu.flags": " ".join(V3),
        "cpu.affinity_cpus": "4",
        "tensorflow.version": "2.21.0",
        "env.TF_NUM_INTEROP_THREADS": "1",
    }
    assert device.from_flat(flat) == deviceclass.device_class(
        gpus=[],
        inter_op=1,
        cpu="x86-64-v3",
        environ={"TF_NUM_INTRAOP_THREADS": "4"},
        onednn=deviceclass.onednn_setting("2.21.0", {}, "x86_64", V3),
    )
    assert device.from_flat(flat) == "cpu:x86-64-v3;intra_op=4;inter_op=1;onednn=off"
    # A field the probe could not read never becomes part of the class.
    arm = {"os.arch": "aarch64", "cpu.isa_level": "unavailable", "cpu.affinity_cpus": "error: x"}
    assert device.from_flat(arm) == "cpu:aarch64;intra_op=default;inter_op=default;onednn=unknown"


def test_cli_selftest_usage_errors(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    res = cli("selftest", "--hygiene-script", str(tmp_path / "missing.py"))
    assert res.code == 2 and "does not exist" in res.stderr
    res = cli("selftest", "--python", str(tmp_path / "no-python"))
    assert res.code == 2 and "not found" in res.stderr
