"""envpin.fleet.multiworker: each node's worker runs as the node task sends them back, the verdict across the
workers (envpin.probe.replicas.compare_workers), its document read back by `fleet report`, and what the fleet's
verdict makes of it. The workers themselves run in tests/tf (loopback) and tests/slurm (two nodes)."""

from __future__ import annotations

import base64
import json
import zlib
from pathlib import Path
from typing import Any

import pytest

from envpin.errors import ReportError
from envpin.fleet import inputs, multiworker, nodetask, slurm
from envpin.fleet.aggregate import CONSISTENT, DIFFERS, FAILED, OK, TIMED_OUT, NodeFailure, aggregate, to_json_text
from envpin.fleet.multiworker import SKIPPED, Worker
from tests.fleetdata import CPU_CLASS, OTHER_WEIGHTS, WEIGHTS, node, worker_payload, worker_task_result

W, OTHER = WEIGHTS, OTHER_WEIGHTS
payload, task_result = worker_payload, worker_task_result


def judged(results: dict[str, dict[str, Any] | None], runs: int = 2) -> multiworker.MultiWorker:
    nodes = [
        multiworker.node_runs(n, r, None if r is not None else (FAILED, "no result"), runs) for n, r in results.items()
    ]
    return multiworker.judge(nodes, runs, launcher="slurm", job="42")


def test_workers_that_agree_and_repeat_are_consistent() -> None:
    m = judged({"n1": task_result(payload(0), payload(0)), "n2": task_result(payload(1), payload(1))})
    assert m.status == CONSISTENT and m.problems == []
    assert [(w.node, w.task_index, w.status, w.hashes, w.repeats) for w in m.workers] == [
        ("n1", 0, OK, (W, W), True),
        ("n2", 1, OK, (W, W), True),
    ]
    assert m.resolver == "SlurmClusterResolver" and m.verdict is not None and m.verdict["verdict"] == "deterministic"
    assert m.line() == "multi-worker self-test: 2 workers hold the same weights in 2 runs, every run repeats"


def test_workers_are_ordered_by_their_task_index_not_their_node_name() -> None:
    m = judged({"b": task_result(payload(0), payload(0)), "a": task_result(payload(1), payload(1))})
    assert [(w.node, w.task_index) for w in m.workers] == [("b", 0), ("a", 1)]


def test_a_worker_that_does_not_repeat_itself_is_a_difference() -> None:
    m = judged({"n1": task_result(payload(0), payload(0, OTHER)), "n2": task_result(payload(1), payload(1, OTHER))})
    assert m.status == DIFFERS
    assert [w.repeats for w in m.workers] == [False, False]
    assert any("differs between runs" in p for p in m.problems), m.problems
    assert m.line().startswith("multi-worker self-test: ")


def test_workers_that_disagree_are_a_difference() -> None:
    m = judged({"n1": task_result(payload(0), payload(0)), "n2": task_result(payload(1, OTHER), payload(1, OTHER))})
    assert m.status == DIFFERS and any("workers disagree" in p for p in m.problems), m.problems


def test_a_node_without_tensorflow_is_skipped_and_fails_the_self_test() -> None:
    skipped = {"skipped": "TensorFlow cannot be imported: ModuleNotFoundError: No module named 'tensorflow'"}
    m = judged({"n1": task_result(payload(0), payload(0)), "n2": task_result(skipped, skipped)})
    assert m.status == FAILED and m.verdict is None
    assert [(w.status, w.reason) for w in m.workers][1] == (SKIPPED, skipped["skipped"])
    assert m.line() == "multi-worker self-test did not run on every node (n2 skipped)"


def test_what_a_worker_failed_with_is_its_reason() -> None:
    crashed = {"exit_code": 1, "stdout": "", "stderr": "Traceback...\nRuntimeError: boom\n", "trace": ""}
    result = task_result(payload(0))
    result["workers"].append(crashed)
    m = judged({"n1": result, "n2": task_result({"error": "cluster resolver slurm: ValueError: x"}, payload(1))})
    (w1, w2) = m.workers
    assert (w1.status, w1.reason) == (
        FAILED,
        "run 2: the worker exited with status 1 and printed no result: RuntimeError: boom",
    )
    assert (w2.status, w2.reason) == (FAILED, "run 1: cluster resolver slurm: ValueError: x")


def test_a_task_that_timed_out_or_gave_nothing_is_named() -> None:
    late = task_result(payload(0), status="timeout")
    late["error"] = "worker run 2 of 2 did not finish within 60 s"
    m = judged({"n1": late, "n2": None})
    assert [(w.status, w.reason) for w in m.workers] == [
        (TIMED_OUT, "worker run 2 of 2 did not finish within 60 s"),
        (FAILED, "no result"),
    ]
    short = judged({"n1": task_result(payload(0)), "n2": task_result(payload(1))}, runs=2)
    assert {w.reason for w in short.workers} == {"1 of 2 runs came back"}


def test_the_trace_bytes_reach_compare_workers() -> None:
    """With the traces back, the first differing element is named (compare_workers reads the files)."""
    import struct

    def traced(index: int, value: float) -> tuple[dict[str, Any], str]:
        data = struct.pack("<2f", 1.0, value)
        p = payload(index, W if value == 1.0 else OTHER)
        p["trace"] = [
            {
                "name": "weights/w0",
                "step": 0,
                "replica": index,
                "dtype": "float32",
                "shape": [2],
                "sha256": __import__("hashlib").sha256(data).hexdigest(),
                "offset": 0,
                "bytes": len(data),
            }
        ]
        return p, base64.b64encode(zlib.compress(data)).decode()

    def result(index: int, values: tuple[float, float]) -> dict[str, Any]:
        (p1, t1), (p2, t2) = traced(index, values[0]), traced(index, values[1])
        r = task_result(p1, p2)
        r["workers"][0]["trace"], r["workers"][1]["trace"] = t1, t2
        return r

    m = judged({"n1": result(0, (1.0, 2.0)), "n2": result(1, (1.0, 2.0))})
    assert m.status == DIFFERS
    first = m.verdict["first_difference"] if m.verdict else {}
    assert (first.get("name"), first.get("element"), first.get("values")) == ("weights/w0", 1, ["1.0", "2.0"])


def test_the_document_reads_back_as_written(tmp_path: Path) -> None:
    m = judged({"n1": task_result(payload(0), payload(0)), "n2": task_result(payload(1), payload(1))})
    data = json.loads(multiworker.document_text(m))
    assert multiworker.is_document(data) and data["fleet_selftest_schema"] == multiworker.SCHEMA
    back = multiworker.from_document(data, "x.json")
    assert back == m.replace(source="x.json")
    assert Worker.from_json(m.workers[0].to_json()) == m.workers[0]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"fleet_selftest_schema": 99}, "uses fleet self-test schema 99; this envpin reads up to 1"),
        ({"fleet_selftest_schema": "1"}, "fleet_selftest_schema must be a positive integer"),
        ({"workers": [{"node": "n1"}]}, "is not a readable fleet self-test result (KeyError"),
        ({"workers": [{"node": "n1", "status": "great"}]}, "is not a readable fleet self-test result (ValueError"),
    ],
)
def test_a_document_this_envpin_cannot_read_is_a_report_error(change: dict[str, Any], message: str) -> None:
    m = judged({"n1": task_result(payload(0), payload(0)), "n2": task_result(payload(1), payload(1))})
    data = {**json.loads(multiworker.document_text(m)), **change}
    with pytest.raises(ReportError, match=message.replace("(", r"\(")):
        multiworker.from_document(data, "x.json")


def test_fleet_report_reads_the_document_beside_the_reports(tmp_path: Path) -> None:
    m = judged({"n1": task_result(payload(0), payload(0)), "n2": task_result(payload(1), payload(1))})
    for name in ("n1", "n2"):
        (tmp_path / f"{name}.json").write_text(json.dumps(node(name)))
    (tmp_path / multiworker.RESULT_NAME).write_text(multiworker.document_text(m))
    found: list[multiworker.MultiWorker] = []
    entries = inputs.read([tmp_path], None, found)
    assert [e.name for e in entries] == ["n1", "n2"]
    assert found == [m.replace(source=str(tmp_path / multiworker.RESULT_NAME))]
    with pytest.raises(ReportError, match="is a multi-worker self-test result, not a probe report"):
        inputs.read([tmp_path])


def test_the_fleet_verdict_carries_the_self_test() -> None:
    good = judged({"n1": task_result(payload(0), payload(0)), "n2": task_result(payload(1), payload(1))})
    bad = judged({"n1": task_result(payload(0), payload(0)), "n2": task_result(payload(1, OTHER), payload(1, OTHER))})
    skipped = judged({"n1": task_result({"skipped": "no TF"}), "n2": task_result({"skipped": "no TF"})}, runs=1)
    reports = [("n1", node("n1")), ("n2", node("n2"))]
    # Without a self-test the fleet's JSON is what it always was.
    assert "multiworker" not in aggregate(reports).to_json()
    ok = aggregate(reports, multiworker=[good])
    assert (ok.status, ok.exit_code) == (CONSISTENT, 0)
    assert ok.verdict() == "2 nodes consistent except informational differences; " + good.line()
    differs = aggregate(reports, multiworker=[bad])
    assert (differs.status, differs.exit_code) == (DIFFERS, 1) and differs.verdict().startswith(bad.line())
    failed = aggregate(reports, multiworker=[skipped])
    assert (failed.status, failed.exit_code) == (FAILED, 1)
    assert failed.verdict().startswith(
        "failed: multi-worker self-test did not run on every node (n1 skipped, n2 skipped)"
    )
    doc = json.loads(to_json_text(failed))["multiworker"]
    assert [d["status"] for d in doc] == [FAILED] and doc[0]["workers"][0]["reason"] == "no TF"
    # A node that failed stays failed; the self-test's line joins the others.
    both = aggregate([("n1", node("n1")), ("n2", NodeFailure(FAILED, "gone"))], multiworker=[good])
    assert both.verdict().startswith("failed: 1 node failed (n2); ")


def test_port_bases_stay_below_the_ephemeral_range() -> None:
    bases = {multiworker.port_base_for(str(job)) for job in range(0, 5000)}
    assert min(bases) >= multiworker.PORT_FLOOR
    assert max(bases) + multiworker.MAX_RUNS <= multiworker.PORT_FLOOR + multiworker.PORT_SPAN < 32768
    assert multiworker.port_base_for("12") != multiworker.port_base_for("13")


def test_the_worker_task_is_the_node_task_with_workers() -> None:
    args = slurm.worker_task_args(2, 20096, None)
    assert args == [nodetask.WORKERS, "2", "20096", "--resolver", "slurm"]
    assert slurm.worker_task_args(1, 20000, 3)[-2:] == ["--steps", "3"]
    task = slurm.task_command("ab" * 32, 600, probe_args=args, python="/opt/envpin-tf/bin/python")
    assert task[4:6] == ["/opt/envpin-tf/bin/python", "-c"] and task[7:] == ["ab" * 32, "600", *args]
    salloc = slurm.salloc_command(slurm.Plan("debug", 2, None, ()), 600, job_name=slurm.SELFTEST_JOB_NAME)
    assert "--job-name=envpin-fleet-selftest" in salloc and "--nodes=2" in salloc and "--ntasks-per-node=1" in salloc
    srun = slurm.srun_command("7", 2, task, job_name=slurm.SELFTEST_JOB_NAME)
    assert srun[:5] == ["srun", "--jobid=7", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1"]


def test_a_workers_result_survives_the_node_protocol() -> None:
    """The --workers result (probe report, runs, traces) through the checksummed lines and back."""
    result = task_result(payload(0), payload(0))
    result["workers"][0]["trace"] = base64.b64encode(zlib.compress(b"\0" * 300_000)).decode()
    lines = nodetask.frame("n1", result)
    back, broken = slurm.parse_task_output("\n".join(lines))
    assert broken == {} and back == {"n1": result}


def test_fleet_report_reads_the_indexed_jobs_worker_logs(tmp_path: Path) -> None:
    """The Kubernetes collection (docs/fleet.md): each pod's probe log, each pod's worker log (one JSON line per
    run, kubectl's --prefix) and the pod list that names each pod's node."""
    from tests.fleetdata import pod, prefixed

    done = {"name": "envpin-probe", "state": {"terminated": {"exitCode": 0}}, "lastState": {}}
    pods = {"kind": "List", "items": []}
    probe_log = worker_log = ""
    for i, name in enumerate(("gpu-a", "gpu-b")):
        pod_name = f"envpin-selftest-{i}-x{i}"
        pods["items"].append(pod(pod_name, name, {"phase": "Succeeded", "initContainerStatuses": [done]}))
        report = node(name)
        report["host"]["hostname"]["value"] = pod_name
        probe_log += prefixed(pod_name, json.dumps(report, indent=2) + "\n")
        runs = "".join(json.dumps(payload(i, resolver="TFConfigClusterResolver")) + "\n" for _ in range(2))
        worker_log += prefixed(pod_name, runs, container="envpin-worker")
    (tmp_path / "pods.json").write_text(json.dumps(pods))
    (tmp_path / "probe.log").write_text(probe_log)
    (tmp_path / "workers.log").write_text(worker_log)
    found: list[multiworker.MultiWorker] = []
    entries = inputs.read([tmp_path], None, found)
    assert sorted(e.name for e in entries) == ["gpu-a", "gpu-b"]
    (m,) = found
    assert (m.launcher, m.runs, m.status, m.resolver) == ("kubernetes", 2, CONSISTENT, "TFConfigClusterResolver")
    assert [(w.node, w.task_index, w.repeats) for w in m.workers] == [("gpu-a", 0, True), ("gpu-b", 1, True)]
    # One pod's second run missing from its log: that worker is named, the self-test fails.
    (tmp_path / "workers.log").write_text(worker_log.rsplit("[pod/", 1)[0])
    found = []
    inputs.read([tmp_path], None, found)
    assert found[0].status == FAILED
    assert [w.reason for w in found[0].workers] == [None, "1 of 2 runs in its output"]
    with pytest.raises(ReportError, match="holds the multi-worker self-test's worker output"):
        inputs.read([tmp_path / "workers.log"])


def test_an_agreeing_run_is_a_golden_hash_of_its_counted_class() -> None:
    """Two workers across nodes and two on one machine's loopback (the probe's multi-replica self-test) run one
    program over one count of workers: the fleet compares their hashes under '<class>;workers=2'."""
    good = judged({"n1": task_result(payload(0), payload(0)), "n2": task_result(payload(1), payload(1))})
    counted = f"{CPU_CLASS};workers=2"
    assert good.golden() == (counted, W)
    bad = judged({"n1": task_result(payload(0), payload(0, OTHER)), "n2": task_result(payload(1), payload(1, OTHER))})
    assert bad.golden() is None
    assert good.replace(steps=2).golden() is None  # not the self-test's step count: not its golden hash

    def loopback(name: str, weights: str) -> dict[str, Any]:
        report = node(name)
        report["selftest"]["replicas"] = {
            "multi_worker": {"replica_hashes": [{"0": weights, "1": weights}], "device_class": CPU_CLASS}
        }
        return report

    same = aggregate([("n1", loopback("n1", W)), ("n2", node("n2"))], multiworker=[good])
    (group,) = [g for g in same.golden if g.device_class == counted]
    assert group.consistent and group.hashes == {W: ("n1", "n2")}
    assert same.status == CONSISTENT
    other = aggregate([("n1", loopback("n1", OTHER)), ("n2", node("n2"))], multiworker=[good])
    (group,) = [g for g in other.golden if g.device_class == counted]
    assert not group.consistent and group.hashes == {OTHER: ("n1",), W: ("n1", "n2")}
    assert other.status == DIFFERS and any(s.key == f"golden.{counted}" for s in other.spreads)
