"""The multi-replica self-test with real TensorFlow: MirroredStrategy over the CPU split into two logical
devices and MultiWorkerMirroredStrategy over two worker processes on loopback repeat bit for bit, and each
planted hazard turns the verdict red, naming the first collective and element that differ."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from envpin.probe import golden, tfchild

REPO = Path(__file__).resolve().parents[2]


def _run(args: list[str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = tfchild.child_env(None, determinism=None)
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=timeout, cwd=REPO)


def _replicas(*args: str) -> tuple[int, dict[str, Any]]:
    proc = _run([sys.executable, "-m", "envpin.probe.replicas", *args])
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    assert lines, proc.stderr[-2000:]
    return proc.returncode, json.loads(lines[-1])


def test_the_cli_quick_self_test_with_two_replicas_passes(tmp_path: Path) -> None:
    """`envpin selftest --quick --replicas 2`: both set-ups deterministic, every replica and both workers
    holding the same weights, and the report's lines say so."""
    proc = _run([sys.executable, "-m", "envpin", "selftest", "--quick", "--replicas", "2", "--json"])
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    multi = result["replicas"]
    assert multi["problems"] == [], multi["problems"]
    mirrored, worker = multi["mirrored"], multi["multi_worker"]
    assert mirrored["verdict"] == "deterministic" and mirrored["runs_equal"] is True
    assert mirrored["devices"] == ["/cpu:0", "/cpu:1"] and mirrored["replicas"] == [2, 2]
    (first, second) = mirrored["replica_hashes"]
    assert first == second and len(set(first.values())) == 1
    # one run with --quick: the workers agree, which is not yet a run repeated
    assert worker["verdict"] == "workers-agree" and worker["workers_equal"] is True and worker["runs_equal"] is None
    assert worker["communication"] == "RING" and worker["resolver"] == "TFConfigClusterResolver"
    # no problem of the self-test comes from the replicas: whatever else this machine reports
    assert not [p for p in result["problems"] if "Strategy" in p]


def test_splitting_the_cpu_leaves_the_golden_hash_alone() -> None:
    """The golden children run the MirroredStrategy set-up after their training, on a CPU split before the
    first op: the golden hash must be the one an unsplit process gives."""
    env = tfchild.child_env(None, determinism=True)
    plain = tfchild.run_child("envpin.probe.golden", ["--child"], env, 600)
    split = tfchild.run_child("envpin.probe.golden", ["--child", "--replicas", "2", "--replica-steps", "2"], env, 600)
    assert plain[0] is not None and split[0] is not None, (plain[1], split[1])
    assert split[0]["hash"] == plain[0]["hash"]
    assert split[0]["mirrored"]["replicas"] == 2 and split[0]["mirrored"]["steps"] == 2
    assert split[0]["model"] == golden.MODEL


def test_the_full_self_test_repeats_across_runs_and_workers() -> None:
    """Stand-alone, full: two MirroredStrategy runs and two MWMS runs of two workers each, all equal."""
    rc, result = _replicas("--replicas", "2")
    assert rc == 0, result["problems"]
    worker = result["multi_worker"]
    assert worker["runs"] == 2 and worker["workers"] == [2, 2]
    assert worker["runs_equal"] is True and worker["workers_equal"] is True
    assert result["mirrored"]["runs_equal"] is True


def test_a_generator_under_the_scope_seeded_from_entropy_is_caught() -> None:
    rc, result = _replicas("--plant", "generator")
    assert rc == 1
    mirrored, worker = result["mirrored"], result["multi_worker"]
    assert mirrored["verdict"] == "NONDETERMINISTIC" and mirrored["runs_equal"] is False
    diff = mirrored["first_difference"]
    # the noise enters the inputs of step 0, so the first collective of training differs first
    assert (diff["name"], diff["step"]) == ("loss-allreduce", 0)
    assert diff["values"][0] != diff["values"][1]
    assert worker["runs_equal"] is False and worker["first_difference"]["step"] == 0
    # the all-reduce check before training draws nothing random: it still agrees
    assert not diff["name"].startswith("allreduce-")
    assert any(
        p.startswith("MirroredStrategy: runs differ: first at loss-allreduce at step 0") for p in result["problems"]
    )


def test_a_changed_replica_count_is_caught() -> None:
    rc, result = _replicas("--plant", "replicas", "--quick", "--no-multi-worker")
    assert rc == 1
    mirrored = result["mirrored"]
    assert mirrored["replicas"] == [2, 3]
    assert any("the replica count changed between runs (2 vs 3)" in p for p in result["problems"])
    assert mirrored["first_difference"]["name"] == "allreduce-sum"


def test_the_probe_in_an_image_runs_it_too(tmp_path: Path) -> None:
    """`python3 -m envpin.probe --selftest --quick --replicas 2`: what an image runs; the report carries the
    section, and the options say it was asked for."""
    out = tmp_path / "report.json"
    proc = _run([sys.executable, "-m", "envpin.probe", "--selftest", "--quick", "--replicas", "2", "--json", str(out)])
    report = json.loads(out.read_text())
    multi = report["selftest"]["replicas"]
    assert multi["mirrored"]["verdict"] == "deterministic", multi
    assert report["probe"]["options"]["value"]["replicas"] == 2
    assert proc.returncode in (0, 1)
