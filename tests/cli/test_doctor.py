"""`envpin doctor` reading this host for real, across process boundaries: the console script against this
machine and against an engine that is not there (the docker SDK leaks a socket when a connect fails, so these
run in their own process), and the NVML and nvidia-smi readers against stand-ins built or run here. The
verdicts from simulated hosts are tests/unit/test_doctor.py."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from envpin.doctor import readings
from envpin.doctor.diagnosis import CANNOT_TELL, FORWARD_COMPAT, WILL_NOT_RUN, WILL_RUN, diagnose, target_from_ngc
from envpin.doctor.readings import DockerReading, Gpu, Readings
from tests.conftest import run_envpin

VERDICTS = (WILL_RUN, FORWARD_COMPAT, WILL_NOT_RUN, CANNOT_TELL)
DOCKER_OK = DockerReading(version="24.0.7", runtimes=("nvidia", "runc"))


FAKE_NVML_C = r"""
#include <stdint.h>
#include <string.h>
int nvmlInit_v2(void) { return 0; }
int nvmlShutdown(void) { return 0; }
const char *nvmlErrorString(int rc) { return "Unknown Error"; }
int nvmlSystemGetDriverVersion(char *buf, unsigned int n) { strncpy(buf, "470.82.01", n); return 0; }
int nvmlDeviceGetCount_v2(unsigned int *n) { *n = 2; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void **h) { *h = (void *)(uintptr_t)(i + 1); return 0; }
int nvmlDeviceGetName(void *h, char *buf, unsigned int n) {
    strncpy(buf, (uintptr_t)h == 1 ? "Tesla T4" : "NVIDIA GeForce RTX 3090", n); return 0;
}
int nvmlDeviceGetCudaComputeCapability(void *h, int *major, int *minor) {
    *major = (uintptr_t)h == 1 ? 7 : 8; *minor = (uintptr_t)h == 1 ? 5 : 6; return 0;
}
"""


def _nvidia_visible() -> bool:
    """Independent of doctor: is any NVIDIA driver interface present on this machine?"""
    if shutil.which("nvidia-smi") or Path("/proc/driver/nvidia/version").exists():
        return True
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


def test_real_host_through_the_cli() -> None:
    """This host as it is (in a subprocess: an unreachable engine makes the docker SDK leak a socket)."""
    env = {readings.FAKE_ENV: ""}
    res = run_envpin("doctor", "--ngc", "22.06-tf2-py3", "--json", env=env)
    assert res.code in (0, 1, 3) and "Traceback" not in res.stderr, res.stderr
    out = json.loads(res.stdout)
    assert out["verdict"] in VERDICTS and out["readings"]["origin"] == "host"
    assert out["exit_code"] == res.code
    human = run_envpin("doctor", "--ngc", "22.06-tf2-py3", env=env)
    assert human.code == res.code and human.stdout.split(":")[0] == out["verdict"]
    if not _nvidia_visible():
        # Said plainly, never "will run": this host shows no driver to judge.
        assert out["verdict"] in (CANNOT_TELL, WILL_NOT_RUN)
        assert out["readings"]["driver_version"] is None and out["readings"]["gpus"] == []
        assert "no NVIDIA driver or GPU is visible on this host" in human.stdout


def test_real_docker_unreachable_is_a_reading(tmp_path: Path) -> None:
    """A real failed connection (in a subprocess: the docker SDK leaks its socket when the connect fails)."""
    env = {"DOCKER_HOST": f"unix://{tmp_path}/absent.sock", readings.FAKE_ENV: ""}
    res = run_envpin("doctor", "--ngc", "22.06-tf2-py3", "--json", env=env)
    out = json.loads(res.stdout)
    assert res.code == 1 and out["verdict"] == WILL_NOT_RUN
    assert out["readings"]["docker"]["reachable"] is False
    assert out["reasons"][0]["message"].startswith("the Docker engine is not reachable")
    assert "DOCKER_HOST" in out["reasons"][0]["fix"]
    human = run_envpin("doctor", "--ngc", "22.06-tf2-py3", env=env)
    assert human.code == 1 and human.stdout.startswith(f"{WILL_NOT_RUN}: ") and "Traceback" not in human.stderr


def _stand_in_nvml(tmp_path: Path) -> Path:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not installed: cannot build the stand-in libnvidia-ml.so.1")
    src = tmp_path / "nvml.c"
    src.write_text(FAKE_NVML_C)
    lib = tmp_path / "libnvidia-ml.so.1"
    subprocess.run([gcc, "-shared", "-fPIC", "-o", str(lib), str(src)], check=True, capture_output=True, timeout=120)
    return lib


def test_driver_and_gpus_read_through_nvml(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """The real NVML reader (ctypes) against a stand-in library: one T4 and one GeForce on R470."""
    lib = _stand_in_nvml(tmp_path)
    nv = readings.read_nvidia({"ENVPIN_NVML_LIBRARY": str(lib), "PATH": os.environ.get("PATH", "")})
    assert (nv["version"], nv["source"], nv["problem"]) == ("470.82.01", "nvml:nvmlSystemGetDriverVersion", None)
    assert nv["gpus"] == (Gpu(0, "Tesla T4", "7.5"), Gpu(1, "NVIDIA GeForce RTX 3090", "8.6"))
    # Docker section faked (it is not what is tested here); driver and GPUs come from NVML.
    fake = tmp_path / "docker-only.json"
    fake.write_text(json.dumps({"docker": {"version": "24.0.7", "runtimes": ["nvidia"]}}))
    monkeypatch.setenv(readings.FAKE_ENV, str(fake))
    monkeypatch.setenv("ENVPIN_NVML_LIBRARY", str(lib))
    res = cli("doctor", "--ngc", "22.06-tf2-py3", "--json")
    out = json.loads(res.stdout)
    assert res.code == 1 and out["verdict"] == WILL_NOT_RUN
    assert [r["name"] for r in out["reasons"]] == ["gpu 1 forward compatibility"]
    assert {c["name"]: c["status"] for c in out["checks"]}["gpu 0 forward compatibility"] == "forward-compat"


def test_driver_and_gpus_read_through_nvidia_smi(tmp_path: Path) -> None:
    """No NVML library: the probe's nvidia-smi fallback (a stand-in script) feeds the same verdicts."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    row = (
        "Tesla V100-SXM2-16GB, GPU-0f2b2a8e-1c3d-4e5f-8a9b-0c1d2e3f4a5b, 7.0, 16160, 00000000:00:1E.0, "
        "Enabled, [N/A], Enabled, Default, 1530, 1530, 877, 300.00, 300.00, 88.00.4F.00.09, 450.80.02"
    )
    smi = bindir / "nvidia-smi"
    smi.write_text(f'#!/bin/sh\ncase "$1" in --query-gpu=name,uuid,compute_cap,*) echo "{row}";; *) exit 6;; esac\n')
    smi.chmod(0o755)
    nv = readings.read_nvidia({"ENVPIN_NVML_LIBRARY": str(tmp_path / "absent.so"), "PATH": f"{bindir}:/usr/bin:/bin"})
    assert nv["version"] == "450.80.02" and nv["source"] == "nvidia-smi --query-gpu"
    assert nv["gpus"] == (Gpu(0, "Tesla V100-SXM2-16GB", "7.0"),)
    read = Readings(docker=DOCKER_OK, driver_version=nv["version"], driver_source=nv["source"], gpus=nv["gpus"])
    d = diagnose(target_from_ngc("22.06-tf2-py3"), read)
    assert d.verdict == FORWARD_COMPAT


def test_each_reason_is_printed_once() -> None:
    """A reason is the verdict's, with its fix; the check it comes from points up to it instead of repeating it."""
    human = run_envpin("doctor", "--ngc", "22.06-tf2-py3", env={readings.FAKE_ENV: ""})
    out = json.loads(run_envpin("doctor", "--ngc", "22.06-tf2-py3", "--json", env={readings.FAKE_ENV: ""}).stdout)
    reasons = out["reasons"]
    if not reasons:
        pytest.skip("this host gives doctor no reason to list (every check passed)")
    for c in out["checks"]:
        assert human.stdout.count(c["message"]) == 1, (c["message"], human.stdout)
    checks = human.stdout.split("\nchecks:\n", 1)[1]
    assert checks.count("(the reason above)") == len(reasons)
