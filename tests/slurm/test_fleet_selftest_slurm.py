"""`envpin fleet selftest --slurm` end to end: the real CLI, a real Slurm, two real nodes, and on them the real
MultiWorkerMirroredStrategy (tensorflow-cpu in the nodes' /opt/envpin-tf, scripts/slurm.sh): one worker per
node, its cluster from SlurmClusterResolver, RING collectives between the two containers. Then `fleet report`
reads the folder back with the same verdict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envpin.fleet import multiworker
from envpin.reports.diff import check_report
from tests.conftest import Result, run_envpin
from tests.slurm.conftest import NODE_TF_PYTHON, Cluster


def selftest(cluster: Cluster, out: Path, *args: str) -> Result:
    return run_envpin("fleet", "selftest", "--slurm", "--out", str(out), *args, cwd=out.parent, env=cluster.env)


def document(out: Path) -> dict:
    return json.loads((out / multiworker.RESULT_NAME).read_text())


@pytest.fixture
def tf_cluster(cluster: Cluster) -> Cluster:
    missing = [n for n in cluster.nodes[:2] if not cluster.node_has(n, NODE_TF_PYTHON)]
    if missing:
        pytest.skip(f"no {NODE_TF_PYTHON} on {', '.join(missing)} (bash scripts/slurm.sh up installs TensorFlow)")
    return cluster


def test_two_workers_on_two_nodes_agree_and_repeat(tf_cluster: Cluster, tmp_path: Path) -> None:
    out = tmp_path / "selftest"
    res = selftest(tf_cluster, out, "--nodes", "2", "--python", NODE_TF_PYTHON)
    assert res.code == 0, res.stdout + res.stderr
    doc = document(out)
    assert doc["status"] == "consistent" and doc["launcher"] == "slurm" and doc["runs"] == 2
    assert doc["resolver"] == "SlurmClusterResolver" and doc["communication"] == "RING"
    workers = doc["workers"]
    nodes = sorted(w["node"] for w in workers)
    assert len(nodes) == 2 and set(nodes) <= set(tf_cluster.nodes)
    # One worker per node, task indexes 0 and 1 (SLURM_PROCID), each repeating itself, all the same weights.
    assert sorted(w["task_index"] for w in workers) == [0, 1]
    assert all(w["status"] == "ok" and w["repeats"] is True and w["tf_version"] for w in workers)
    assert len({h for w in workers for h in w["hashes"]}) == 1
    verdict = doc["verdict"]
    assert verdict["verdict"] == "deterministic" and verdict["workers_equal"] and verdict["runs_equal"]
    # Each node was probed, under the interpreter the workers ran with.
    for name in nodes:
        report = json.loads((out / f"{name}.json").read_text())
        check_report(report, name)
        assert report["host"]["hostname"]["value"] == name
        assert report["python"]["executable"]["value"].startswith("/opt/envpin-tf/")
    first = res.stdout.splitlines()
    assert any(
        line.startswith("2 nodes consistent") and "2 workers hold the same weights in 2 runs" in line for line in first
    )
    assert "multi-worker self-test (MultiWorkerMirroredStrategy, RING, 2 workers, 2 runs, slurm job" in res.stdout
    assert "slurm job " in res.stderr and " released" in res.stderr

    again = run_envpin("fleet", "report", str(out), "--format", "json", cwd=tmp_path)
    assert again.code == 0, again.stdout + again.stderr
    fleet = json.loads(again.stdout)
    assert fleet["status"] == "consistent" and [m["status"] for m in fleet["multiworker"]] == ["consistent"]
    assert fleet["multiworker"][0]["workers"] == workers
    # The agreed weights are a golden hash of the workers' class counted, beside the loopback self-test's.
    (golden,) = [g for g in fleet["golden"] if g["device_class"].endswith(";workers=2")]
    assert golden["device_class"] == workers[0]["device_class"] + ";workers=2"
    assert golden["consistent"] and golden["hashes"] == {workers[0]["hashes"][0]: nodes}
    text = run_envpin("fleet", "report", str(out), cwd=tmp_path)
    assert text.code == 0 and text.stdout.splitlines()[0] == next(
        line for line in res.stdout.splitlines() if line.startswith("2 nodes consistent")
    )


def test_nodes_without_tensorflow_are_named_and_fail_the_self_test(tf_cluster: Cluster, tmp_path: Path) -> None:
    """The nodes' python3 has no TensorFlow: each worker says so, the probe reports still come back, and the
    verdict (here and in `fleet report`) is failed, naming the nodes."""
    out = tmp_path / "selftest"
    res = selftest(tf_cluster, out, "--runs", "1")
    assert res.code == 1, res.stdout + res.stderr
    doc = document(out)
    assert doc["status"] == "failed" and doc["verdict"] is None
    assert {w["status"] for w in doc["workers"]} == {"skipped"}
    assert all(w["reason"].startswith("TensorFlow cannot be imported") for w in doc["workers"]), doc["workers"]
    verdict = res.stdout.splitlines()[
        next(i for i, ln in enumerate(res.stdout.splitlines()) if ln.startswith("failed:"))
    ]
    assert verdict.startswith("failed: multi-worker self-test did not run on every node (") and "skipped" in verdict
    assert len(list(out.glob("*.json"))) == 3  # two probe reports and the self-test's result
    again = run_envpin("fleet", "report", str(out), cwd=tmp_path)
    assert again.code == 1 and again.stdout.splitlines()[0] == verdict


def test_bad_input_is_refused_before_anything_is_allocated(cluster: Cluster, tmp_path: Path) -> None:
    for args, message in (
        (("--nodes", "1"), "--nodes must be at least 2 for a multi-worker self-test"),
        (("--runs", "0"), "--runs must be from 1 to 8"),
        (("--nodes", str(len(cluster.nodes) + 1)), f"--nodes {len(cluster.nodes) + 1}, but partition"),
    ):
        res = selftest(cluster, tmp_path / "x", *args)
        assert res.code == 2 and message in res.stderr, res.stderr
    proc = cluster.run("squeue", "-h", "--me", "-n", "envpin-fleet-selftest", "-o", "%i")
    assert proc.stdout.strip() == ""


def test_a_node_without_the_interpreter_is_named_and_its_peer_times_out(tf_cluster: Cluster, tmp_path: Path) -> None:
    """One node's TensorFlow venv is gone: that node failed (the task says the interpreter is missing), its
    peer's worker waits for it until --timeout and is named as timed out; the probed node still reports."""
    first, second = tf_cluster.nodes[:2]
    venv = NODE_TF_PYTHON.rsplit("/bin/", 1)[0]
    tf_cluster.node_exec(second, "mv", venv, venv + ".off")
    try:
        out = tmp_path / "selftest"
        res = selftest(
            tf_cluster, out, "--python", NODE_TF_PYTHON, "--timeout", "30", f"--slurm-arg=--nodelist={first},{second}"
        )
    finally:
        tf_cluster.node_exec(second, "mv", venv + ".off", venv)
    assert res.code == 1, res.stdout + res.stderr
    workers = {w["node"]: w for w in document(out)["workers"]}
    assert workers[first]["status"] == "timed_out" and "did not finish within 30 s" in workers[first]["reason"]
    assert workers[second]["status"] == "failed" and "is not installed on the node" in workers[second]["reason"]
    assert (out / f"{first}.json").is_file() and (out / f"{second}.error.txt").is_file()
    verdict = next(line for line in res.stdout.splitlines() if line.startswith("failed:"))
    assert verdict.startswith(f"failed: 1 node failed ({second}); multi-worker self-test did not run on every node")
