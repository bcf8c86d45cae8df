"""The multi-worker self-test's node task (envpin.fleet.nodetask --workers) run for real, as srun starts it on a
node: envpin.pyz on standard input, the probe, then the worker program (envpin.probe.replicas --worker) twice,
here as two workers on loopback (TF_CONFIG, one task process per worker, both at once), and what comes back
judged as `fleet selftest --slurm` judges it. tests/slurm runs the same task on two nodes of a real cluster."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from envpin.environment.payload import payload
from envpin.fleet import multiworker, slurm
from envpin.fleet.aggregate import CONSISTENT, OK


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def test_two_worker_tasks_on_loopback_agree_and_repeat() -> None:
    archive = payload()
    sha = hashlib.sha256(archive).hexdigest()
    ports = _free_ports(2)
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}

    def task(index: int) -> dict:
        env = {
            **os.environ,
            "SLURMD_NODENAME": f"node-{index}",
            "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}}),
        }
        args = slurm.worker_task_args(2, 20000, 2)
        args[args.index("slurm")] = "tf_config"  # loopback: the cluster from TF_CONFIG, not Slurm's variables
        proc = subprocess.run(
            [sys.executable, "-c", slurm.task_source(), sha, "300", *args],
            input=archive,
            capture_output=True,
            timeout=360,
            env=env,
        )
        assert proc.returncode == 0, proc.stderr
        results, broken = slurm.parse_task_output(proc.stdout.decode())
        assert broken == {} and list(results) == [f"node-{index}"]
        return results[f"node-{index}"]

    with ThreadPoolExecutor(max_workers=2) as pool:
        got = list(pool.map(task, range(2)))
    for i, result in enumerate(got):
        assert result["status"] == OK, result
        assert slurm.outcome(f"node-{i}", {"status": OK, "report": result["report"]}, None, [], False, 300).status == OK
        assert len(result["workers"]) == 2 and all(w["trace"] for w in result["workers"]), result["workers"]
    nodes = [multiworker.node_runs(f"node-{i}", r, None, 2) for i, r in enumerate(got)]
    verdict = multiworker.judge(nodes, 2, launcher="loopback", steps=2)
    assert verdict.status == CONSISTENT, (verdict.line(), [w.reason for w in verdict.workers])
    assert [w.task_index for w in verdict.workers] == [0, 1]
    assert verdict.resolver == "TFConfigClusterResolver"
    assert len({h for w in verdict.workers for h in w.hashes}) == 1
