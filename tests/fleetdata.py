"""A small fixed fleet for the fleet tests: reports derived from tests/golden/fleet/base-report.json, and the
files the Kubernetes collection step of docs/fleet.md writes, byte for byte as kubectl writes them."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from tests.conftest import REPO

BASE = REPO / "tests" / "golden" / "fleet" / "base-report.json"
A100 = "NVIDIA A100-SXM4-80GB"
H100 = "NVIDIA H100 80GB HBM3"
HASH_1, HASH_2, HASH_3 = ("sha256:" + c * 64 for c in "123")
PROBE = "envpin-probe"


def base() -> dict[str, Any]:
    return json.loads(BASE.read_text())


def node(name: str, *, gpu: str = A100, cc: str = "8.0", golden: str | None = HASH_1, **changes: Any) -> dict[str, Any]:
    """A report of node `name`; changes are 'section__field' = value (None removes the field)."""
    r = copy.deepcopy(base())
    r["host"]["hostname"]["value"] = name
    r["env"]["ENVPIN_NODE_NAME"]["value"] = name
    r["gpu"]["devices.0.name"]["value"] = gpu
    r["gpu"]["devices.0.compute_capability"]["value"] = cc
    r["gpu"]["devices.0.uuid"]["value"] = f"GPU-{name}"
    r["env"]["NVIDIA_VISIBLE_DEVICES"]["value"] = f"GPU-{name}"
    if golden is None:
        del r["selftest"]
    else:
        r["selftest"]["golden"] = {"hash": golden, "device_class": f"gpu:{gpu};cc={cc};count=1"}
    for key, value in changes.items():
        section, field = key.split("__", 1)
        if value is None:
            r[section].pop(field, None)
        else:
            r[section][field] = {"value": value, "source": "test"}
    return r


def cudnn(version: str) -> dict[str, Any]:
    raw = int(version.replace(".", "")) * 10
    return {
        "version": version,
        "raw": raw,
        "path": f"/usr/lib/x86_64-linux-gnu/libcudnn.so.{version}",
        "loaded_by": "probe",
        "requested": "libcudnn.so.9",
    }


def fixed_fleet() -> dict[str, dict[str, Any]]:
    """file stem -> report: four A100 nodes (one with another driver minor version, one whose golden hash
    differs), one with another cuDNN, one H100 node (another device class)."""
    return {
        "gpu-a01": node("gpu-a01"),
        "gpu-a02": node("gpu-a02"),
        "gpu-a03": node("gpu-a03", gpu__driver_version="550.90.07"),
        "gpu-a04": node("gpu-a04", golden=HASH_2),
        "gpu-b01": node("gpu-b01", cuda__cudnn=cudnn("9.0.0")),
        "gpu-h01": node("gpu-h01", gpu=H100, cc="9.0", golden=HASH_3),
    }


def prefixed(pod: str, text: str, container: str = PROBE) -> str:
    """A pod's output as `kubectl logs --prefix` writes it: '[pod/NAME/CONTAINER] ' before every line
    (kubectl's prefixingWriter, one write per line read)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
        return "".join(f"[pod/{pod}/{container}] {line}\n" for line in lines)
    return "".join(f"[pod/{pod}/{container}] {line}\n" for line in lines[:-1]) + f"[pod/{pod}/{container}] {lines[-1]}"


def pod(name: str, node_name: str, status: dict[str, Any], scheduled: bool = True) -> dict[str, Any]:
    """A probe pod as `kubectl get pods -o json` lists it (the fields envpin reads, and some it does not)."""
    spec: dict[str, Any] = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
                    ]
                }
            }
        },
        "containers": [{"name": "idle", "image": "nvcr.io/nvidia/tensorflow:24.05-tf2-py3"}],
        "initContainers": [{"name": PROBE, "image": "nvcr.io/nvidia/tensorflow:24.05-tf2-py3"}],
    }
    if scheduled:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "envpin", "labels": {"app.kubernetes.io/name": "envpin-probe"}},
        "spec": spec,
        "status": status,
    }


def kubernetes_files() -> tuple[str, dict[str, Any]]:
    """(probe.log, pods.json) of a cluster of three GPU nodes: gpu-c01 probed, the probe failed on gpu-c02,
    and gpu-c03 had no free GPU for the probe pod."""
    ok = node("gpu-c01")
    ok["host"]["hostname"]["value"] = "envpin-probe-x7k2p"  # in a pod, the host name is the pod's
    report = json.dumps(ok, sort_keys=True, indent=2, ensure_ascii=True) + "\n"
    log = prefixed("envpin-probe-x7k2p", report) + prefixed(
        "envpin-probe-m4q9z",
        'Traceback (most recent call last):\n  File "<frozen runpy>", line 198\n'
        "OSError: [Errno 30] Read-only file system: '/opt/envpin'\n",
    )
    done = {
        "name": PROBE,
        "state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
        "lastState": {},
        "ready": True,
        "restartCount": 0,
    }
    crashed = {
        "name": PROBE,
        "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s restarting failed container"}},
        "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}},
        "ready": False,
        "restartCount": 3,
    }
    pods = {
        "apiVersion": "v1",
        "kind": "List",
        "metadata": {"resourceVersion": ""},
        "items": [
            pod("envpin-probe-x7k2p", "gpu-c01", {"phase": "Running", "initContainerStatuses": [done]}),
            pod("envpin-probe-m4q9z", "gpu-c02", {"phase": "Pending", "initContainerStatuses": [crashed]}),
            pod(
                "envpin-probe-p8w3n",
                "gpu-c03",
                {
                    "phase": "Pending",
                    "conditions": [
                        {
                            "type": "PodScheduled",
                            "status": "False",
                            "reason": "Unschedulable",
                            "message": "0/9 nodes are available: 1 Insufficient nvidia.com/gpu.",
                        }
                    ],
                },
                scheduled=False,
            ),
        ],
    }
    return log, pods


def write_fleet(folder: Path, kubernetes: bool = True) -> Path:
    """The fixed fleet's reports as envpin probe --out writes them, plus the Kubernetes files."""
    folder.mkdir(parents=True, exist_ok=True)
    for stem, report in fixed_fleet().items():
        (folder / f"{stem}.json").write_text(json.dumps(report, sort_keys=True, indent=2) + "\n")
    if kubernetes:
        log, pods = kubernetes_files()
        (folder / "probe.log").write_text(log)
        (folder / "pods.json").write_text(json.dumps(pods, indent=4) + "\n")
    return folder


def write_slurm_run(
    folder: Path, reports: dict[str, dict[str, Any]], failures: dict[str, tuple[str, str]] | None = None
) -> Path:
    """A folder as `envpin fleet probe --slurm` leaves it, written by its own writer
    (envpin.fleet.slurm.write_outcomes): <node>.json per report, <node>.error.txt per (status, error)."""
    from envpin.fleet.slurm import NodeOutcome, write_outcomes

    outcomes = [NodeOutcome(name, "ok", data=report) for name, report in reports.items()]
    outcomes += [NodeOutcome(name, status, error=error) for name, (status, error) in (failures or {}).items()]
    folder.mkdir(parents=True, exist_ok=True)
    write_outcomes(folder, outcomes)
    return folder


#: The multi-worker self-test's device class on the test cluster's CPU nodes, and two weights hashes.
CPU_CLASS = "cpu:x86-64-v3;intra_op=2;inter_op=2;onednn=off"
WEIGHTS, OTHER_WEIGHTS = "sha256:" + "a" * 64, "sha256:" + "b" * 64


def worker_payload(index: int, weights: str = WEIGHTS, grad: str = "1" * 64, **extra: Any) -> dict[str, Any]:
    """A worker's payload as `python -m envpin.probe.replicas --worker` prints it (one replica per worker)."""
    trace = [
        {"name": "grad-allreduce/w0", "step": 0, "replica": index, "dtype": "float32", "shape": [2], "sha256": grad},
        {"name": "weights/w0", "step": 0, "replica": index, "dtype": "float32", "shape": [2], "sha256": weights[7:]},
    ]
    return {
        "setup": "multi_worker",
        "role": "worker",
        "task_index": index,
        "num_workers": 2,
        "resolver": "SlurmClusterResolver",
        "communication": "RING",
        "tf_version": "2.21.0",
        "device_class": CPU_CLASS,
        "replica_hashes": {str(index): weights},
        "trace": trace,
        "seconds": 7.5,
        **extra,
    }


def worker_task_result(*payloads: dict[str, Any] | str, status: str = "ok") -> dict[str, Any]:
    """What envpin.fleet.nodetask --workers sends back: the probe's output, then one entry per run."""
    runs = [
        {"exit_code": 0, "stdout": p if isinstance(p, str) else json.dumps(p) + "\n", "stderr": "", "trace": ""}
        for p in payloads
    ]
    return {"status": status, "report": "{}", "exit_code": 0, "stderr": "", "workers": runs}


def write_selftest_run(folder: Path, results: dict[str, dict[str, Any] | None], runs: int = 2) -> Path:
    """A folder as `envpin fleet selftest --slurm` leaves it, written by its own writers: each node's report
    (tests.fleetdata.node) and the self-test's result judged from the nodes' task results."""
    from envpin.fleet import multiworker
    from envpin.fleet.slurm import NodeOutcome, write_outcomes

    nodes = [multiworker.node_runs(n, r, None if r else ("failed", "no result"), runs) for n, r in results.items()]
    verdict = multiworker.judge(nodes, runs, launcher="slurm", job="42")
    folder.mkdir(parents=True, exist_ok=True)
    text = multiworker.document_text(verdict).encode()
    write_outcomes(
        folder, [NodeOutcome(n, "ok", data=node(n)) for n in results], {folder / multiworker.RESULT_NAME: text}
    )
    return folder
