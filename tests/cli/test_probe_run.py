"""The probe as it runs in images: a separate isolated interpreter, schema-valid JSON, no secrets in any output,
broken environments recorded field by field instead of crashing the probe, and vermin's reading of its code
for Python 3.6 (the static checks that need no process: tests/unit/test_probe_run.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from envpin.probe import fields, load_schema
from tests.conftest import REPO

PROBE_DIR = REPO / "envpin" / "probe"

# -I ignores PYTHONPATH (it implies -E), so the repository is put on sys.path by the -c stub instead.
_STUB = (
    "import sys; sys.path.insert(0, {repo!r}); import runpy; "
    "runpy.run_module('envpin.probe', run_name='__main__', alter_sys=True)"
)


def run_probe(
    *args: str,
    env: dict[str, Any] | None = None,
    no_site: bool = False,
    timeout: int = 120,
    selftest: str = "--no-selftest",
    python: str = sys.executable,
) -> subprocess.CompletedProcess[str]:
    """The probe in an isolated interpreter; `selftest` is the self-test flag ("" for the default, which runs
    it where TensorFlow is importable: the tests that are not about it leave it out)."""
    base: dict[str, Any] = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root")}
    base.update(env or {})
    flags = [selftest] if selftest else []
    cmd = [python, "-I", *(["-S"] if no_site else []), "-c", _STUB.format(repo=str(REPO)), *flags, *args]
    return subprocess.run(cmd, env=base, capture_output=True, text=True, timeout=timeout, check=False)


def probe_json(tmp_path: Path, *args: str, **kw: Any) -> dict[str, Any]:
    out = tmp_path / "report.json"
    res = run_probe("--json", str(out), *args, **kw)
    assert res.returncode == 0, res.stderr
    report = json.loads(out.read_text())
    jsonschema.validate(report, load_schema())
    return report


def test_vermin_python36() -> None:
    vermin = Path(sys.executable).parent / "vermin"
    if not vermin.exists():
        pytest.skip("vermin is not installed next to this interpreter (pip install -e '.[test]')")
    res = subprocess.run(
        [str(vermin), "-t=3.6-", "--no-tips", "--violations", str(PROBE_DIR)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert res.returncode == 0, res.stdout + res.stderr


# --- real runs ---------------------------------------------------------------------------------------------


def test_isolated_run_without_site_packages(tmp_path: Path) -> None:
    """-I -S: no third-party module is importable, so the probe can only be using the standard library."""
    report = probe_json(tmp_path, no_site=True)
    assert report["probe_schema"] == 1 and report["fingerprint"].startswith("sha256:")
    assert report["python"]["version"]["value"] == ".".join(map(str, sys.version_info[:3]))
    assert report["fingerprint"] == fields.fingerprint(report)
    if not Path("/proc/driver/nvidia").exists():
        assert "unavailable" in report["gpu"]["count"]


def _old_pythons() -> list[str]:
    """Interpreters of the versions NGC images ship, where this machine has them (pyenv or PATH). The probe's
    runs under each of them are in tests/pythons/test_pythons.py (warnings as errors, stderr empty, the same
    results as the host's)."""
    from tests.pythons.test_pythons import IMAGE_PYTHONS, find_python

    return [exe for exe in map(find_python, IMAGE_PYTHONS) if exe]


def test_isolated_run_reads_the_same_packages_as_pip(tmp_path: Path) -> None:
    report = probe_json(tmp_path)
    dists = report["packages"]["distributions"]["value"]
    pip = subprocess.run(
        [sys.executable, "-I", "-m", "pip", "list", "--format=json", "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    expected = {fields_name(p["name"]): p["version"] for p in json.loads(pip.stdout)}
    # pip lists what is importable from this interpreter's site (both isolated: no user site).
    missing = {k: v for k, v in expected.items() if dists.get(k) != v and k != "envpin"}
    assert missing == {}


def fields_name(name: str) -> str:
    from envpin.probe.pyenv import normalize

    return normalize(name)


def test_default_probe_does_not_import_tensorflow() -> None:
    code = (
        f"import sys; sys.path.insert(0, {str(REPO)!r})\n"
        "from envpin.probe import collect\n"
        "r = collect()\n"
        "print('tensorflow' in sys.modules, r['tensorflow']['runtime'].get('unavailable', ''))\n"
    )
    res = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, check=True, timeout=120)
    imported, reason = res.stdout.strip().split(" ", 1)
    assert imported == "False"
    assert "not imported" in reason or "not installed" in reason


def test_default_self_test_says_why_it_did_not_run_without_tensorflow(tmp_path: Path) -> None:
    """Images without TensorFlow still give the fingerprint, exit 0, and the report says why no self-test."""
    res = run_probe("--json", str(tmp_path / "r.json"), "--markdown", str(tmp_path / "r.md"), no_site=True, selftest="")
    assert res.returncode == 0, res.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    jsonschema.validate(report, load_schema())
    reason = report["selftest"]["skipped"]
    assert reason.startswith(f"TensorFlow is not installed for {sys.executable}")
    assert report["probe"]["options"]["value"]["selftest"] == "auto"
    assert "self-test skipped: TensorFlow is not installed" in res.stderr
    assert "running the determinism self-test" not in res.stderr
    assert f"Skipped: {reason}" in (tmp_path / "r.md").read_text()


def test_insisted_self_test_without_tensorflow_fails_and_no_selftest_leaves_it_out(tmp_path: Path) -> None:
    # A virtual environment of its own: the self-test's children run the same interpreter, with its site.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    python = str(tmp_path / "venv" / "bin" / "python")
    insisted = run_probe("--json", str(tmp_path / "a.json"), selftest="--selftest", python=python)
    assert insisted.returncode == 1
    skipped = json.loads((tmp_path / "a.json").read_text())["selftest"]["skipped"]
    assert "No module named 'tensorflow'" in skipped
    assert f"self-test could not run: {skipped}" in insisted.stderr
    left_out = run_probe("--json", str(tmp_path / "b.json"), no_site=True, selftest="--no-selftest")
    assert left_out.returncode == 0 and left_out.stderr == ""
    report = json.loads((tmp_path / "b.json").read_text())
    assert "selftest" not in report and report["probe"]["options"]["value"]["selftest"] is False
    both = run_probe("--selftest", no_site=True, selftest="--no-selftest")
    assert both.returncode == 2 and "not allowed with argument" in both.stderr


def test_out_dir_names_are_host_time_pid(tmp_path: Path) -> None:
    res = run_probe("--out", str(tmp_path / "reports"))
    assert res.returncode == 0, res.stderr
    names = sorted(p.name for p in (tmp_path / "reports").iterdir())
    assert len(names) == 2 and names[0].endswith(".json") and names[1].endswith(".md")
    report = json.loads((tmp_path / "reports" / names[0]).read_text())
    host = report["host"]
    stamp = host["time_utc"]["value"].replace("-", "").replace(":", "")
    stem = f"{host['hostname']['value']}-{stamp}-{host['pid']['value']}"
    assert names == [stem + ".json", stem + ".md"]
    assert host["hostname"]["value"] == os.uname().nodename


def test_json_to_dev_null_and_stdout(tmp_path: Path) -> None:
    assert run_probe("--json", "/dev/null").returncode == 0
    res = run_probe()
    assert res.returncode == 0
    jsonschema.validate(json.loads(res.stdout), load_schema())


@pytest.mark.parametrize("option", ["--json", "--out"])
def test_unwritable_output_is_an_error_and_a_hint_exit_2(tmp_path: Path, option: str) -> None:
    res = run_probe(option, str(tmp_path / "missing-dir" / "r"))
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: cannot write the report") and lines[1].startswith("hint: ")
    assert list(tmp_path.iterdir()) == []  # no folder made on the way


# --- secrets -----------------------------------------------------------------------------------------------

PLANTED = {
    "TF_SERVING_PASSWORD": "correct-horse-battery-staple-42",  # credential name
    "HF_TOKEN": "hf_" + "Q8w7E6r5T4y3U2i1O0pAsDfGh",  # not a recorded prefix at all
    "NCCL_SOCKET_IFNAME": "ghp_" + "Zx9Cv8Bn7Mm6Lk5Jh4Gf3Dd2Ss1Aa0Qq",  # value pattern on a recorded name
    "XLA_FLAGS": "--xla_dump_to=https://deploy:Pa55w0rdXyz@dumps.example.invalid/x",  # URL credentials
    "CUDA_CACHE_KEY_ID": "AKIA" + "IOSFODNN7EXAMPLE",
    "TF_CONFIG": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ0cmFpbmVyIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV",
    "OMP_SCHEDULE": "Vq3Lm9Xz7Rt2Wp5Ks8Nd4Fh6Jb1Gc0Ye",  # high-entropy run
}


def test_planted_secrets_never_reach_any_output(tmp_path: Path) -> None:
    out = tmp_path / "reports"
    res = run_probe(
        "--out", str(out), "--json", str(tmp_path / "r.json"), "--markdown", str(tmp_path / "r.md"), env=PLANTED
    )
    assert res.returncode == 0, res.stderr
    blobs = {p.name: p.read_text() for p in [*out.iterdir(), tmp_path / "r.json", tmp_path / "r.md"]}
    blobs["stderr"] = res.stderr
    for name, text in blobs.items():
        for secret in PLANTED.values():
            assert secret not in text, f"{secret} leaked into {name}"
        for fragment in ("Pa55w0rdXyz", "IOSFODNN7EXAMPLE", "battery-staple", "Zx9Cv8Bn7Mm6"):
            assert fragment not in text, f"{fragment} leaked into {name}"
    report = json.loads((tmp_path / "r.json").read_text())
    env = report["env"]
    for name in (
        "TF_SERVING_PASSWORD",
        "NCCL_SOCKET_IFNAME",
        "XLA_FLAGS",
        "CUDA_CACHE_KEY_ID",
        "TF_CONFIG",
        "OMP_SCHEDULE",
    ):
        assert env[name]["present"] is True and env[name]["redacted"] is True, name
    assert "HF_TOKEN" not in env  # not a determinism-relevant name: not recorded at all


# --- broken environments -----------------------------------------------------------------------------------


def _fake_root(tmp_path: Path) -> Path:
    """A /proc-/sys-/etc-like tree where the files collectors need are unreadable or garbage."""
    root = tmp_path / "root"
    (root / "proc" / "self").mkdir(parents=True)
    (root / "proc" / "cpuinfo").mkdir()  # a folder where a file should be: reading it fails (EISDIR)
    (root / "proc" / "meminfo").write_bytes(b"\xff\xfe\x00garbage\x00\x01")  # no MemTotal line
    (root / "proc" / "self" / "cgroup").symlink_to(root / "nowhere")  # dangling
    (root / "proc" / "self" / "maps").write_bytes(os.urandom(4096))
    (root / "etc").mkdir()
    (root / "etc" / "os-release").write_text("this is not KEY=value\n")
    (root / "etc" / "ld.so.cache").write_bytes(os.urandom(2048))
    return root


def test_unreadable_proc_files_become_field_errors(tmp_path: Path) -> None:
    root = _fake_root(tmp_path)
    report = probe_json(tmp_path, env={"ENVPIN_PROBE_ROOT": str(root)})
    assert "IsADirectoryError" in report["cpu"]["isa_level"]["error"]
    assert "MemTotal" in report["memory"]["total_bytes"]["error"]
    assert "error" in report["limits"]["cpu"] and "FileNotFoundError" in report["limits"]["cpu"]["error"]
    assert "error" in report["os"]["release"]
    # The rest of the probe went on.
    assert report["python"]["version"]["value"] == ".".join(map(str, sys.version_info[:3]))
    assert report["cpu"]["logical_cpus"]["value"] == os.cpu_count()
    errors = report["probe"]["errors"]["value"]
    assert "cpu.isa_level" in errors and "memory.total_bytes" in errors
    assert report["probe"]["options"]["value"]["root"] == str(root)


def test_garbage_ld_library_path(tmp_path: Path) -> None:
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "libcudnn.so.9").write_bytes(b"not an ELF file at all")
    (junk / "libnccl.so.2").write_text("#!/bin/sh\n")
    (tmp_path / "afile").write_text("x")
    garbage = f"::{junk}:/nonexistent/dir:{tmp_path / 'afile'}:relative/dir:\x7f\x1b[31m:" + "x" * 5000
    # C locale and undecodable bytes in a recorded variable, as in a badly configured container.
    report = probe_json(
        tmp_path,
        env={"LD_LIBRARY_PATH": garbage, "LANG": "C", "LC_ALL": "C", "CUDA_DEVICE_ORDER": b"PCI_BUS_ID\xff\xfe"},
    )
    assert report["env"]["LD_LIBRARY_PATH"]["value"] == garbage
    assert report["env"]["CUDA_DEVICE_ORDER"]["value"] == "PCI_BUS_ID\\xff\\xfe"
    # The dynamic loader was asked for the sonames found on the path; both files are junk.
    assert "libcudnn.so.9" in report["cuda"]["cudnn"]["error"]
    assert "libnccl.so.2" in report["cuda"]["nccl"]["error"]
    assert "cuda.cudnn" in report["probe"]["errors"]["value"]


FAKE_NVML_C = r"""
#include <stdint.h>
#ifndef INIT_RC
#define INIT_RC 999
#endif
int nvmlInit_v2(void) { return INIT_RC; }
int nvmlInit(void) { return INIT_RC; }
int nvmlShutdown(void) { return 0; }
const char *nvmlErrorString(int rc) {
    if (rc == 3) return "Not Supported";
    if (rc == 9) return "Driver Not Loaded";
    return "Unknown Error";
}
int nvmlDeviceGetCount_v2(unsigned int *n) { *n = 1; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void **h) { *h = (void *)(uintptr_t)(i + 1); return 0; }
int nvmlDeviceGetMigMode(void *h, unsigned int *c, unsigned int *p) { return 3; }
#define FAIL(name) int name(void) { return 999; }
FAIL(nvmlSystemGetDriverVersion) FAIL(nvmlSystemGetNVMLVersion) FAIL(nvmlSystemGetCudaDriverVersion_v2)
FAIL(nvmlDeviceGetName) FAIL(nvmlDeviceGetUUID) FAIL(nvmlDeviceGetCudaComputeCapability)
FAIL(nvmlDeviceGetMemoryInfo) FAIL(nvmlDeviceGetPciInfo_v3) FAIL(nvmlDeviceGetEccMode)
FAIL(nvmlDeviceGetPersistenceMode) FAIL(nvmlDeviceGetComputeMode) FAIL(nvmlDeviceGetMaxClockInfo)
FAIL(nvmlDeviceGetApplicationsClock) FAIL(nvmlDeviceGetPowerManagementLimit)
FAIL(nvmlDeviceGetEnforcedPowerLimit) FAIL(nvmlDeviceGetVbiosVersion)
"""


def _fake_nvml(tmp_path: Path, init_rc: int) -> Path:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not installed: cannot build the failing libnvidia-ml.so.1")
    src = tmp_path / "fake_nvml.c"
    src.write_text(FAKE_NVML_C)
    lib = tmp_path / f"rc{init_rc}" / "libnvidia-ml.so.1"
    lib.parent.mkdir()
    subprocess.run(
        [gcc, "-shared", "-fPIC", f"-DINIT_RC={init_rc}", "-o", str(lib), str(src)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return lib


def test_nvml_whose_init_fails_is_an_error_not_a_crash(tmp_path: Path) -> None:
    lib = _fake_nvml(tmp_path, 999)
    report = probe_json(tmp_path, env={"ENVPIN_NVML_LIBRARY": str(lib)})
    gpu = report["gpu"]
    assert "nvmlInit_v2: NVML_ERROR_UNKNOWN (Unknown Error)" in gpu["backend"]["error"]
    assert "error" in gpu["count"] and "error" in gpu["driver_major"]
    assert "gpu.backend" in report["probe"]["errors"]["value"]


def test_nvml_without_driver_is_unavailable(tmp_path: Path) -> None:
    lib = _fake_nvml(tmp_path, 9)
    report = probe_json(tmp_path, env={"ENVPIN_NVML_LIBRARY": str(lib)})
    assert "NVML_ERROR_DRIVER_NOT_LOADED" in report["gpu"]["count"]["unavailable"]
    assert not any(e.startswith("gpu.") for e in report["probe"]["errors"]["value"])


def test_nvml_device_queries_failing_one_by_one(tmp_path: Path) -> None:
    lib = _fake_nvml(tmp_path, 0)
    report = probe_json(tmp_path, env={"ENVPIN_NVML_LIBRARY": str(lib)})
    gpu = report["gpu"]
    assert gpu["backend"]["value"] == "nvml" and gpu["count"]["value"] == 1
    for name in ("name", "uuid", "compute_capability", "memory_total_bytes", "pci_bus_id", "clocks_max_mhz"):
        assert "NVML_ERROR_UNKNOWN" in gpu[f"devices.0.{name}"]["error"], name
    assert "not supported" in gpu["devices.0.mig"]["unavailable"]
    assert "NVML_ERROR_UNKNOWN" in gpu["driver_version"]["error"]


def test_nvidia_smi_fallback(tmp_path: Path) -> None:
    """No NVML library: the probe asks nvidia-smi (a stand-in script here: this machine has no GPU)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    smi = bindir / "nvidia-smi"
    row = (
        "Tesla V100-SXM2-16GB, GPU-0f2b2a8e-1c3d-4e5f-8a9b-0c1d2e3f4a5b, 7.0, 16160, 00000000:00:1E.0, "
        "Enabled, [N/A], Enabled, Default, 1530, 1530, 877, 300.00, 300.00, 88.00.4F.00.09, 470.82.01"
    )
    smi.write_text(f'#!/bin/sh\ncase "$1" in --query-gpu=name,uuid,compute_cap,*) echo "{row}";; *) exit 6;; esac\n')
    smi.chmod(0o755)
    report = probe_json(
        tmp_path, env={"ENVPIN_NVML_LIBRARY": str(tmp_path / "absent.so"), "PATH": f"{bindir}:/usr/bin:/bin"}
    )
    gpu = report["gpu"]
    assert gpu["backend"]["value"] == "nvidia-smi" and "absent.so" in gpu["fallback_reason"]["value"]
    assert gpu["devices.0.name"]["value"] == "Tesla V100-SXM2-16GB"
    assert gpu["devices.0.compute_capability"]["value"] == "7.0"
    assert gpu["driver_major"]["value"] == "470"
    # With a GPU in the report, CPU features stop being fingerprinted.
    assert "cpu.isa_level" not in fields.fingerprint_fields(report)
