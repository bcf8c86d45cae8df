"""The distributed stack through real probe runs (an isolated interpreter per report, a temporary HOME with an
~/.nccl.conf, NCCL_CONF_FILE, TF_CONFIG) compared by the real `envpin diff` and `envpin verify`; and a
libnvidia-ml.so.1 built with the NVML header's own structures for NVLink, the NVSwitch fabric and MIG."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from envpin.environment import lockfile
from envpin.environment.plan import make_plan
from envpin.environment.render import render, write_environment
from envpin.probe import fields
from tests.cli.test_probe_run import probe_json
from tests.conftest import run_envpin
from tests.unit.lock_reports import as_lock_image


def _home(tmp_path: Path, name: str, conf: str | None) -> Path:
    home = tmp_path / name
    home.mkdir()
    if conf is not None:
        (home / ".nccl.conf").write_text(conf)
    return home


def _report(tmp_path: Path, name: str, conf: str | None = None, **env: str) -> Path:
    """A real probe report written by a separate interpreter whose HOME holds `conf` as ~/.nccl.conf."""
    out = tmp_path / f"{name}.json"
    home = _home(tmp_path, name + "-home", conf)
    report = probe_json(tmp_path, env={"HOME": str(home), **env})
    out.write_text(json.dumps(report))
    return out


def _diff(a: Path, b: Path) -> tuple[int, dict[str, Any]]:
    res = run_envpin("diff", str(a), str(b), "--json")
    assert res.code in (0, 1), res.stderr
    return res.code, json.loads(res.stdout)


def _breaking(doc: dict[str, Any]) -> list[str]:
    return [d["key"] for d in doc["differences"] if d["severity"] == "breaking"]


def test_a_changed_nccl_conf_setting_is_a_breaking_difference(tmp_path: Path) -> None:
    ring = _report(tmp_path, "ring", "NCCL_ALGO=Ring\nNCCL_PROTO=Simple\n")
    tree = _report(tmp_path, "tree", "NCCL_ALGO=Tree\nNCCL_PROTO=Simple\n")
    code, doc = _diff(ring, tree)
    assert code == 1 and _breaking(doc) == ["distributed.nccl.from_files.NCCL_ALGO"]
    assert doc["verdict"] == "1 breaking difference"
    assert doc["fingerprint"]["a"] != doc["fingerprint"]["b"]
    text = run_envpin("diff", str(ring), str(tree))
    assert text.code == 1 and text.stdout.splitlines()[0] == "1 breaking difference" and "Tree" in text.stdout


def test_the_same_settings_are_no_difference_and_a_comment_is_a_risk(tmp_path: Path) -> None:
    conf = "NCCL_ALGO=Ring\nNCCL_NVLS_ENABLE=0\n"
    a, b = _report(tmp_path, "a", conf), _report(tmp_path, "b", conf)
    code, doc = _diff(a, b)
    assert code == 0 and doc["counts"]["breaking"] == 0 and doc["counts"]["risk"] == 0
    assert doc["fingerprint"]["a"] == doc["fingerprint"]["b"]
    commented = _report(tmp_path, "c", "# pinned: NVIDIA/nccl#1497\n" + conf)
    code, doc = _diff(a, commented)
    assert code == 0 and doc["verdict"] == "no breaking differences; 1 risk difference"
    assert [d["key"] for d in doc["differences"] if d["severity"] == "risk"] == ["distributed.nccl.conf.home.sha256"]


def test_nccl_algo_in_the_environment_is_breaking_and_wins_over_the_files(tmp_path: Path) -> None:
    conf = "NCCL_ALGO=Ring\n"
    ring, tree = _report(tmp_path, "r", conf, NCCL_ALGO="Ring"), _report(tmp_path, "t", conf, NCCL_ALGO="Tree")
    code, doc = _diff(ring, tree)
    assert code == 1 and _breaking(doc) == ["env.NCCL_ALGO"]
    report = json.loads(tree.read_text())
    assert report["distributed"]["nccl.effective"]["value"]["NCCL_ALGO"] == {"value": "Tree", "source": "env"}
    assert "nccl.from_files" not in report["distributed"]  # the file's line has no effect


def test_nccl_conf_file_replaces_the_home_file(tmp_path: Path) -> None:
    job = tmp_path / "job.conf"
    job.write_text("NCCL_ALGO=Tree\n")
    home_only = _report(tmp_path, "h", "NCCL_ALGO=Ring\n")
    with_job = _report(tmp_path, "j", "NCCL_ALGO=Ring\n", NCCL_CONF_FILE=str(job))
    report = json.loads(with_job.read_text())["distributed"]
    assert "nccl.conf.home" not in report and report["nccl.from_files"]["value"] == {"NCCL_ALGO": "Tree"}
    code, doc = _diff(home_only, with_job)
    assert code == 1 and _breaking(doc) == ["distributed.nccl.from_files.NCCL_ALGO"]
    assert str(job) not in json.dumps(fields.fingerprint_fields(report={"distributed": report}))


def _lock(tmp_path: Path) -> Path:
    plan = make_plan(ngc="20.02", tf="2.1")
    out = tmp_path / "env"
    write_environment(out, plan, render(plan))
    return out / lockfile.LOCK_NAME


def _in_image(report: Path, lock: Path) -> Path:
    """The report as a probe inside the lock's image gives it (its plan baked in, the recipe's env)."""
    out = report.with_name(report.stem + "-image.json")
    out.write_text(json.dumps(as_lock_image(json.loads(report.read_text()), lock)))
    return out


def test_verify_against_a_lock_names_a_changed_nccl_conf(tmp_path: Path) -> None:
    lock = _lock(tmp_path)
    ring = _in_image(_report(tmp_path, "ring", "NCCL_ALGO=Ring\n"), lock)
    again = _in_image(_report(tmp_path, "again", "NCCL_ALGO=Ring\n"), lock)
    tree = _in_image(_report(tmp_path, "tree", "NCCL_ALGO=Tree\n"), lock)
    rec = run_envpin("verify", "--lock", str(lock), "--report", str(ring), "--record")
    assert rec.code == 0, rec.stderr
    assert 'distributed.nccl.from_files.NCCL_ALGO" = "Ring"' in lock.read_text()
    same = run_envpin("verify", "--lock", str(lock), "--report", str(again), "--json")
    assert same.code == 0 and json.loads(same.stdout)["verdict"] == "identical"
    changed = run_envpin("verify", "--lock", str(lock), "--report", str(tree), "--json")
    doc = json.loads(changed.stdout)
    assert changed.code == 1 and doc["verdict"] == "1 breaking difference"
    assert [(d["key"], d["a"], d["b"]) for d in doc["differences"]] == [
        ("distributed.nccl.from_files.NCCL_ALGO", "Ring", "Tree")
    ]
    # The file gone: a lock recorded with it names the setting that is no longer made.
    gone = _in_image(_report(tmp_path, "gone", None), lock)
    doc = json.loads(run_envpin("verify", "--lock", str(lock), "--report", str(gone), "--json").stdout)
    assert [(d["key"], d["b"]) for d in doc["differences"] if d["severity"] == "breaking"] == [
        ("distributed.nccl.from_files.NCCL_ALGO", None)
    ]


def test_verify_against_a_lock_names_nccl_algo_set_in_the_environment(tmp_path: Path) -> None:
    lock = _lock(tmp_path)
    plain = _in_image(_report(tmp_path, "plain"), lock)
    algo = _in_image(_report(tmp_path, "algo", NCCL_ALGO="Ring"), lock)
    assert run_envpin("verify", "--lock", str(lock), "--report", str(plain), "--record").code == 0
    res = run_envpin("verify", "--lock", str(lock), "--report", str(algo), "--json")
    assert res.code == 1 and _breaking(json.loads(res.stdout)) == ["env.NCCL_ALGO"]


def _tf_config(index: int, workers: int = 2) -> str:
    return json.dumps(
        {
            "cluster": {"chief": ["chief-0.job.svc:2222"], "worker": [f"w-{i}.job.svc:2222" for i in range(workers)]},
            "task": {"type": "worker", "index": index},
        }
    )


def test_workers_of_one_job_do_not_differ_but_another_cluster_shape_does(tmp_path: Path) -> None:
    w0 = _report(tmp_path, "w0", TF_CONFIG=_tf_config(0))
    w1 = _report(tmp_path, "w1", TF_CONFIG=_tf_config(1))
    code, doc = _diff(w0, w1)
    assert code == 0 and doc["counts"]["breaking"] == 0
    assert "distributed.tf_config.task_index" in {d["key"] for d in doc["differences"]}
    for path in (w0, w1):
        assert ".job.svc" not in path.read_text()  # no host of the cluster in the report
    bigger = _report(tmp_path, "w3", TF_CONFIG=_tf_config(0, workers=3))
    code, doc = _diff(w0, bigger)
    assert code == 1 and _breaking(doc) == ["distributed.tf_config.cluster.worker"]


# --- NVML built from the header's own structures ----------------------------------------------------------

FAKE_NVML_LINKS_C = r"""
/* Two H100s. The structures and the version macro are nvml.h's (NVIDIA/go-nvml gen/nvml/nvml.h at 2f9e261:
   l.141-142, l.3808, l.3813-3819, l.3924-3953): if ctypes laid them out differently, the probe would read
   the clique id and the health summary from the wrong bytes. */
#include <stdint.h>
#include <string.h>
#include <stdio.h>
typedef int nvmlReturn_t;
typedef unsigned char nvmlGpuFabricState_t;
#define NVML_GPU_FABRIC_UUID_LEN 16
typedef struct {
    unsigned char clusterUuid[NVML_GPU_FABRIC_UUID_LEN]; nvmlReturn_t status; unsigned int cliqueId;
    nvmlGpuFabricState_t state;
} nvmlGpuFabricInfo_t;
typedef struct {
    unsigned int version; unsigned char clusterUuid[NVML_GPU_FABRIC_UUID_LEN]; nvmlReturn_t status;
    unsigned int cliqueId; nvmlGpuFabricState_t state; unsigned int healthMask;
} nvmlGpuFabricInfo_v2_t;
typedef struct {
    unsigned int version; unsigned char clusterUuid[NVML_GPU_FABRIC_UUID_LEN]; nvmlReturn_t status;
    unsigned int cliqueId; nvmlGpuFabricState_t state; unsigned int healthMask; unsigned char healthSummary;
} nvmlGpuFabricInfo_v3_t;
#define NVML_STRUCT_VERSION(data, ver) (unsigned int)(sizeof(nvml ## data ## _v ## ver ## _t) | (ver << 24U))
#define nvmlGpuFabricInfo_v2 NVML_STRUCT_VERSION(GpuFabricInfo, 2)
#define nvmlGpuFabricInfo_v3 NVML_STRUCT_VERSION(GpuFabricInfo, 3)
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;

static int gpu(void *h) { return (int)(uintptr_t)h - 1; }
int nvmlInit_v2(void) { return 0; }
int nvmlShutdown(void) { return 0; }
const char *nvmlErrorString(int rc) { return rc == 3 ? "Not Supported" : "Unknown Error"; }
int nvmlSystemGetDriverVersion(char *b, unsigned n) { snprintf(b, n, "550.54.15"); return 0; }
int nvmlSystemGetNVMLVersion(char *b, unsigned n) { snprintf(b, n, "12.550.54.15"); return 0; }
int nvmlSystemGetCudaDriverVersion_v2(int *v) { *v = 12040; return 0; }
int nvmlDeviceGetCount_v2(unsigned *n) { *n = 2; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **h) { *h = (void *)(uintptr_t)(i + 1); return 0; }
int nvmlDeviceGetName(void *h, char *b, unsigned n) { snprintf(b, n, "NVIDIA H100 80GB HBM3"); return 0; }
int nvmlDeviceGetUUID(void *h, char *b, unsigned n) {
    snprintf(b, n, gpu(h) ? "GPU-bbbb2222-0000-0000-0000-000000000001" : "GPU-aaaa1111-0000-0000-0000-000000000000");
    return 0;
}
int nvmlDeviceGetCudaComputeCapability(void *h, int *major, int *minor) { *major = 9; *minor = 0; return 0; }
int nvmlDeviceGetMemoryInfo(void *h, nvmlMemory_t *m) { m->total = 85520809984ULL; return 0; }
int nvmlDeviceGetMigMode(void *h, unsigned *cur, unsigned *pend) { *cur = *pend = gpu(h); return 0; }
int nvmlDeviceGetMaxMigDeviceCount(void *h, unsigned *n) { *n = 7; return 0; }
int nvmlDeviceGetMigDeviceHandleByIndex(void *h, unsigned i, void **mig) {
    if (i >= 2) return 6; /* NVML_ERROR_NOT_FOUND: an empty slot */
    *mig = (void *)(uintptr_t)(100 + i); return 0;
}
int nvmlDeviceGetNvLinkState(void *h, unsigned link, int *active) {
    if (gpu(h) == 1) return 3;                    /* NOT_SUPPORTED: no NVLink on this one */
    if (link == 35) { *active = 1; return 0; }    /* only a probe that asks up to NVML_NVLINK_MAX_LINKS sees it */
    if (link >= 18) return 2;                     /* INVALID_ARGUMENT: no such link */
    *active = link % 2 == 0; return 0;
}
#ifndef OLD_DRIVER
int nvmlDeviceGetGpuFabricInfoV(void *h, nvmlGpuFabricInfo_v3_t *info) {
    if (gpu(h) == 1) return 3;
#ifdef V2_ONLY
    if (info->version != nvmlGpuFabricInfo_v2) return 25;
#else
    if (info->version != nvmlGpuFabricInfo_v3 && info->version != nvmlGpuFabricInfo_v2) return 25;
#endif
    memset(info->clusterUuid, 0xab, NVML_GPU_FABRIC_UUID_LEN);
    info->status = 0; info->cliqueId = 32767; info->state = 3; info->healthMask = 0x2aaa;
    if (info->version == nvmlGpuFabricInfo_v3) info->healthSummary = 3;
    return 0;
}
#else
int nvmlDeviceGetGpuFabricInfo(void *h, nvmlGpuFabricInfo_t *info) {
    if (gpu(h) == 1) return 3;
    info->status = 0; info->cliqueId = 4242; info->state = 3; return 0;
}
#endif
#define NS(name) int name(void) { return 3; }
NS(nvmlDeviceGetPciInfo_v3) NS(nvmlDeviceGetEccMode) NS(nvmlDeviceGetPersistenceMode) NS(nvmlDeviceGetComputeMode)
NS(nvmlDeviceGetMaxClockInfo) NS(nvmlDeviceGetApplicationsClock) NS(nvmlDeviceGetPowerManagementLimit)
NS(nvmlDeviceGetEnforcedPowerLimit) NS(nvmlDeviceGetVbiosVersion)
"""


def _nvml(tmp_path: Path, *defines: str) -> Path:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not installed: cannot build the stand-in libnvidia-ml.so.1")
    src = tmp_path / "nvml_links.c"
    src.write_text(FAKE_NVML_LINKS_C)
    lib = tmp_path / ("-".join(defines) or "v3") / "libnvidia-ml.so.1"
    lib.parent.mkdir()
    cmd = [gcc, "-shared", "-fPIC", "-Wall", "-Werror", *(f"-D{d}" for d in defines), "-o", str(lib), str(src)]
    subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    return lib


def test_nvlink_fabric_mig_and_the_device_order_from_nvml(tmp_path: Path) -> None:
    lib = _nvml(tmp_path)
    report = probe_json(tmp_path, env={"ENVPIN_NVML_LIBRARY": str(lib), "CUDA_VISIBLE_DEVICES": "GPU-bbbb,0"})
    gpu, dist = report["gpu"], report["distributed"]
    assert gpu["devices.0.nvlink_active_links"]["value"] == 10  # links 0-17 even, and link 35
    assert gpu["devices.0.fabric"]["value"] == {
        "state": "completed",
        "status": "NVML_SUCCESS",
        "clique_id": 32767,
        "health": "limited capacity",
    }
    assert "devices.1.nvlink_active_links" not in gpu and "devices.1.fabric" not in gpu
    assert gpu["devices.1.mig"]["value"] == "enabled" and gpu["devices.1.mig_devices"]["value"] == 2
    assert "devices.0.mig_devices" not in gpu
    h100 = "NVIDIA H100 80GB HBM3;cc=9.0"
    assert dist["gpus.order"]["value"] == [f"1:{h100}", f"0:{h100}"] and dist["gpus.count"]["value"] == 2
    fingerprinted = fields.fingerprint_fields(report)
    assert fingerprinted["distributed.gpus.order"] == json.dumps([f"1:{h100}", f"0:{h100}"], separators=(",", ":"))
    assert "GPU-" not in json.dumps(fingerprinted)  # UUIDs name cards, not their kind
    # The other order of the same two cards is a breaking difference; the same order by index is none.
    other = probe_json(tmp_path, env={"ENVPIN_NVML_LIBRARY": str(lib), "CUDA_VISIBLE_DEVICES": "0,1"})
    same = probe_json(tmp_path, env={"ENVPIN_NVML_LIBRARY": str(lib), "CUDA_VISIBLE_DEVICES": "1,GPU-aaaa1111"})
    a, b, c = (tmp_path / f"{n}.json" for n in "abc")
    for path, doc in ((a, report), (b, other), (c, same)):
        path.write_text(json.dumps(doc))
    assert _breaking(_diff(a, b)[1]) == ["distributed.gpus.order"]
    code, doc = _diff(a, c)
    assert code == 0 and doc["counts"]["breaking"] == 0


@pytest.mark.parametrize(
    ("define", "fabric"),
    [
        ("V2_ONLY", {"state": "completed", "status": "NVML_SUCCESS", "clique_id": 32767}),
        ("OLD_DRIVER", {"state": "completed", "status": "NVML_SUCCESS", "clique_id": 4242}),
    ],
)
def test_fabric_on_older_drivers(tmp_path: Path, define: str, fabric: dict[str, Any]) -> None:
    report = probe_json(tmp_path, env={"ENVPIN_NVML_LIBRARY": str(_nvml(tmp_path, define))})
    assert report["gpu"]["devices.0.fabric"]["value"] == fabric
    assert not any(e.startswith("gpu.") for e in report["probe"]["errors"]["value"])
