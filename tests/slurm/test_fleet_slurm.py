"""`envpin fleet probe --slurm` end to end: the real CLI, a real Slurm (salloc, srun) and real nodes.

Each test changes one node the way a real fleet drifts (a site setting in its task environment, a missing
interpreter, a drained node, a probe that hangs) and checks that the node is named, never dropped.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from envpin.reports.diff import check_report
from tests.conftest import Result, run_envpin
from tests.slurm.conftest import Cluster, docker


def fleet_probe(cluster: Cluster, out: Path, *args: str) -> Result:
    return run_envpin("fleet", "probe", "--slurm", "--out", str(out), *args, cwd=out.parent, env=cluster.env)


def reports(out: Path) -> dict[str, dict]:
    return {p.name[: -len(".json")]: json.loads(p.read_text()) for p in sorted(out.glob("*.json"))}


def errors(out: Path) -> dict[str, str]:
    return {p.name[: -len(".error.txt")]: p.read_text() for p in sorted(out.glob("*.error.txt"))}


def verdict(stdout: str) -> str:
    """The fleet verdict in `fleet probe`'s output (after its table of nodes) or `fleet report`'s."""
    return next(line for line in stdout.splitlines() if line[:1].isalnum())


def report_again(cluster: Cluster, out: Path, probe: Result) -> Result:
    """`fleet report` on the folder the probe wrote, as the README recommends: the same verdict and exit
    status, also against the partition's node list (--expect-nodes)."""
    again = run_envpin("fleet", "report", str(out), cwd=out.parent)
    assert (again.code, verdict(again.stdout)) == (probe.code, verdict(probe.stdout)), again.stdout + again.stderr
    listed = out.parent / "nodes.txt"
    listed.write_text("".join(f"{n}\n" for n in cluster.nodes))
    checked = run_envpin("fleet", "report", str(out), "--expect-nodes", str(listed), cwd=out.parent)
    assert (checked.code, verdict(checked.stdout)) == (probe.code, verdict(probe.stdout)), checked.stdout
    return again


def test_the_cluster_schedules_sbatch_and_srun(cluster: Cluster) -> None:
    """The cluster itself: at least three idle nodes; srun reaches each one; sbatch runs a job to its end
    and reports the job's exit status."""
    assert len(cluster.nodes) >= 3
    proc = cluster.run("srun", f"--nodes={len(cluster.nodes)}", "--ntasks-per-node=1", "hostname")
    assert proc.returncode == 0, proc.stderr
    assert sorted(proc.stdout.split()) == list(cluster.nodes)
    ok = cluster.run(
        "sbatch",
        "--wait",
        "--parsable",
        "--nodes=1",
        "--output=/dev/null",
        "--wrap",
        "python3 -c 'import json, sys; json.dumps(sys.version_info[:2])'",
    )
    assert ok.returncode == 0 and ok.stdout.strip().isdigit(), ok.stderr
    failed = cluster.run("sbatch", "--wait", "--nodes=1", "--output=/dev/null", "--wrap", "exit 3")
    assert failed.returncode == 3


def test_every_node_is_probed_once(cluster: Cluster, tmp_path: Path) -> None:
    out = tmp_path / "fleet"
    res = fleet_probe(cluster, out)
    assert res.code == 0, res.stdout + res.stderr
    got = reports(out)
    assert sorted(got) == list(cluster.nodes) and errors(out) == {}
    for node, report in got.items():
        check_report(report, node)
        # The report was written on the node it is named after.
        assert report["host"]["hostname"]["value"] == node
    assert len({r["fingerprint"] for r in got.values()}) == 1
    n = len(cluster.nodes)
    assert f"nodes: {n} ({n} probed, 0 failed, 0 timed out)" in res.stdout
    assert res.stdout.count(f"{n} nodes consistent") == 1
    # The probe runs the self-test by default; these nodes have no TensorFlow, and the report says so.
    for report in got.values():
        assert report["selftest"]["skipped"].startswith("TensorFlow is not installed for ")
    assert "slurm job " in res.stderr and " released" in res.stderr
    assert report_again(cluster, out, res).stdout.startswith(f"{n} nodes consistent")

    two = fleet_probe(cluster, tmp_path / "two", "--nodes", "2")
    assert two.code == 0, two.stdout + two.stderr
    assert len(reports(tmp_path / "two")) == 2
    # Two of the partition's nodes probed: against its node list, the third is missing.
    listed = tmp_path / "nodes.txt"
    listed.write_text("".join(f"{node}\n" for node in cluster.nodes))
    short = run_envpin("fleet", "report", str(tmp_path / "two"), "--expect-nodes", str(listed))
    (left,) = set(cluster.nodes) - set(reports(tmp_path / "two"))
    assert short.code == 1 and short.stdout.startswith(f"failed: 1 node missing ({left}); "), short.stdout
    counted = run_envpin("fleet", "report", str(tmp_path / "two"), "--expect", str(n))
    assert counted.code == 1 and counted.stdout.startswith(f"failed: 1 node missing (2 of {n} expected nodes found)")


def test_a_node_with_other_thread_settings_is_named(cluster: Cluster, tmp_path: Path) -> None:
    odd = cluster.nodes[1]
    cluster.node_env(odd, "OMP_NUM_THREADS=3")
    try:
        res = fleet_probe(cluster, tmp_path / "fleet")
    finally:
        cluster.node_env(odd)
    assert res.code == 1, res.stdout + res.stderr
    got = reports(tmp_path / "fleet")
    assert sorted(got) == list(cluster.nodes)
    assert got[odd]["env"]["OMP_NUM_THREADS"]["value"] == "3"
    others = [n for n in cluster.nodes if n != odd]
    assert f"outliers: {odd}" in res.stdout
    reference = next(line for line in res.stdout.splitlines() if "(reference)" in line)
    assert all(node in reference for node in others)
    row = next(line for line in res.stdout.splitlines() if "env.OMP_NUM_THREADS" in line)
    assert "breaking" in row and "(absent)" in row and f"3 (1: {odd})" in res.stdout


def test_a_node_without_python_is_reported_failed(cluster: Cluster, tmp_path: Path) -> None:
    out = tmp_path / "fleet"
    assert fleet_probe(cluster, out).code == 0  # every node has a report from a first run
    broken = cluster.nodes[-1]
    cluster.node_exec(broken, "mv", "/usr/bin/python3", "/usr/bin/python3.envpin-test")
    try:
        res = fleet_probe(cluster, out)
    finally:
        cluster.node_exec(broken, "mv", "/usr/bin/python3.envpin-test", "/usr/bin/python3")
    assert res.code == 1, res.stdout + res.stderr
    # The node's earlier report is gone: the folder shows this run's outcome for every node.
    assert sorted(reports(out)) == [n for n in cluster.nodes if n != broken], (res.stdout, errors(out))
    failed = errors(out)
    assert list(failed) == [broken]
    assert failed[broken].startswith("status: failed\n") and "python3 is not installed on the node" in failed[broken]
    assert "1 failed" in res.stdout and broken in res.stdout
    assert verdict(res.stdout).startswith(f"failed: 1 node failed ({broken}); ")
    # Read back from the folder, the error file is the same failed node: never "consistent".
    assert "consistent" not in verdict(report_again(cluster, out, res).stdout)


def test_a_drained_node_is_reported_not_dropped(cluster: Cluster, tmp_path: Path) -> None:
    drained = cluster.nodes[0]
    proc = cluster.run("scontrol", "update", f"nodename={drained}", "state=drain", "reason=envpin test")
    assert proc.returncode == 0, proc.stderr
    try:
        res = fleet_probe(cluster, tmp_path / "fleet")
        too_many = fleet_probe(cluster, tmp_path / "many", "--nodes", str(len(cluster.nodes)))
    finally:
        cluster.run("scontrol", "update", f"nodename={drained}", "state=resume")
    assert res.code == 1, res.stdout + res.stderr
    assert sorted(reports(tmp_path / "fleet")) == list(cluster.nodes[1:])
    assert errors(tmp_path / "fleet") == {
        drained: "status: failed\nerror: not probed: Slurm lists the node as drained (envpin test)\n"
    }
    assert too_many.code == 2 and f"({1} down or drained: {drained})" in too_many.stderr


def test_a_hanging_probe_times_out_on_its_node(cluster: Cluster, tmp_path: Path) -> None:
    """The probe hangs on one node (its interpreter loads a sitecustomize that sleeps when it runs the
    archive): that node times out by itself, the others report."""
    slow = cluster.nodes[0]
    hang = "import sys, time\nif sys.argv and sys.argv[0].endswith('envpin.pyz'):\n    time.sleep(600)\n"
    cluster.node_exec(
        slow, "sh", "-c", f"mkdir -p /opt/envpin-hang && printf '%s' \"{hang}\" >/opt/envpin-hang/sitecustomize.py"
    )
    cluster.node_env(slow, "PYTHONPATH=/opt/envpin-hang")
    try:
        res = fleet_probe(cluster, tmp_path / "fleet", "--timeout", "5")
    finally:
        cluster.node_env(slow)
        cluster.node_exec(slow, "rm", "-rf", "/opt/envpin-hang")
    assert res.code == 1, res.stdout + res.stderr
    assert errors(tmp_path / "fleet") == {slow: "status: timed_out\nerror: the probe did not finish within 5 s\n"}
    assert sorted(reports(tmp_path / "fleet")) == list(cluster.nodes[1:])
    assert "1 timed out" in res.stdout
    again = report_again(cluster, tmp_path / "fleet", res)
    assert verdict(again.stdout).startswith(f"failed: 1 node timed out ({slow}); ")


def test_image_needs_a_container_runtime_on_the_nodes(cluster: Cluster, tmp_path: Path) -> None:
    """These nodes have no Apptainer: with --image every node fails with the reason, none is dropped."""
    res = fleet_probe(cluster, tmp_path / "fleet", "--image", "127.0.0.1:5000/nvidia/tensorflow:20.02-tf2-py3")
    assert res.code == 1, res.stdout + res.stderr
    failed = errors(tmp_path / "fleet")
    assert sorted(failed) == list(cluster.nodes) and reports(tmp_path / "fleet") == {}
    assert all("apptainer is not installed on the node (not found on PATH)" in text for text in failed.values())


def test_a_node_that_stops_answering_is_reported(cluster: Cluster, tmp_path: Path) -> None:
    """One node's slurmd hangs (its container is frozen): srun cannot launch there and, as Slurm does,
    ends the step on every node. Every node is reported failed with srun's reason; none is dropped."""
    frozen = cluster.nodes[-1]
    subprocess.run([docker(), "pause", frozen], check=True, capture_output=True, timeout=60)
    try:
        res = fleet_probe(cluster, tmp_path / "fleet", "--timeout", "30")
    finally:
        subprocess.run([docker(), "unpause", frozen], check=True, capture_output=True, timeout=60)
    assert res.code == 1, res.stdout + res.stderr
    failed = errors(tmp_path / "fleet")
    assert sorted(failed) == list(cluster.nodes) and reports(tmp_path / "fleet") == {}
    assert f"{len(cluster.nodes)} failed" in res.stdout
    assert "task launch failed" in failed[frozen]
    assert all("Application launch failed" in text for text in failed.values())


def _our_jobs(cluster: Cluster) -> list[str]:
    proc = cluster.run("squeue", "-h", "--me", "-n", "envpin-fleet-probe", "-o", "%i %T %k")
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split("\n")[:-1]


def test_ctrl_c_while_the_allocation_waits_leaves_no_job(cluster: Cluster, tmp_path: Path) -> None:
    """Every node is busy, so the fleet probe's request pends. An interrupt to envpin alone (salloc gets no
    signal from the terminal) ends it with 130, and its pending job is gone: it would otherwise be granted
    later and sit idle until its time limit."""
    import signal

    hold = cluster.run(
        "salloc", "--no-shell", f"--nodes={len(cluster.nodes)}", "--job-name=envpin-test-hold", "--time=5"
    )
    held = re.search(r"job allocation (\d+)", hold.stderr)
    assert hold.returncode == 0 and held, hold.stderr
    script = Path(sys.executable).with_name("envpin")
    try:
        proc = subprocess.Popen(
            [str(script), "fleet", "probe", "--slurm", "--out", str(tmp_path / "fleet")],
            env={**os.environ, **cluster.env},
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while not any(" PENDING envpin-" in job for job in _our_jobs(cluster)):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.5)
        os.kill(proc.pid, signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 130, stderr
        assert _our_jobs(cluster) == []
        assert "Traceback" not in stderr
        assert not (tmp_path / "fleet").exists()
    finally:
        cluster.run("scancel", held.group(1))
        cluster.wait_idle()
