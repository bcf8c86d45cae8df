"""The multi-replica self-test's verdicts from traces: which collective differs first, and where."""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envpin.probe import replicas
from envpin.probe.selftest import report
from envpin.probe.selftest.run import problems
from tests.props import examples

SCHEMA = json.loads((Path(replicas.__file__).parent / "selftest" / "selftest.schema.json").read_text())


class Trace:
    """A trace file and its index, written the way a child writes them (little-endian float32)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: list[dict] = []
        self._data = b""

    def add(self, name: str, step: int, replica: int, values: list[float], shape: list[int] | None = None) -> None:
        data = struct.pack(f"<{len(values)}f", *values)
        self.entries.append(
            {
                "name": name,
                "step": step,
                "replica": replica,
                "dtype": "float32",
                "shape": shape or [len(values)],
                "sha256": hashlib.sha256(data).hexdigest(),
                "offset": len(self._data),
                "bytes": len(data),
            }
        )
        self._data += data
        self.path.write_bytes(self._data)

    def payload(self, replica_count: int = 2, hashes: dict | None = None, **extra: object) -> dict:
        return {
            "trace": self.entries,
            "replicas": replica_count,
            "replica_hashes": hashes or {str(r): "sha256:" + "a" * 64 for r in range(replica_count)},
            "final_loss": 1.5,
            **extra,
        }


def run(tmp_path: Path, name: str, grads: list[list[float]], weights: list[float] | None = None) -> Trace:
    """One run of two replicas: an all-reduce per step (one vector per replica), then the weights."""
    t = Trace(tmp_path / f"{name}.bin")
    for step, values in enumerate(grads):
        for r in (0, 1):
            t.add("grad-allreduce/w0", step, r, values)
        for r in (0, 1):
            t.add("weights/w0", step, r, weights or [0.5, 0.25])
    return t


def test_equal_runs_are_deterministic(tmp_path: Path) -> None:
    a = run(tmp_path, "a", [[1.0, 2.0], [3.0, 4.0]])
    b = run(tmp_path, "b", [[1.0, 2.0], [3.0, 4.0]])
    verdict = replicas.judge([(a.payload(), str(a.path)), (b.payload(), str(b.path))])
    assert verdict["verdict"] == "deterministic"
    assert verdict["runs_equal"] is True
    assert verdict["problems"] == []


def test_first_differing_collective_and_element(tmp_path: Path) -> None:
    a = run(tmp_path, "a", [[1.0, 2.0, 3.0], [3.0, 4.0, 5.0]])
    b = run(tmp_path, "b", [[1.0, 2.0, 3.0], [3.0, 4.5, 5.5]])
    verdict = replicas.judge([(a.payload(), str(a.path)), (b.payload(), str(b.path))])
    diff = verdict["first_difference"]
    assert (diff["name"], diff["step"], diff["replica"]) == ("grad-allreduce/w0", 1, 0)
    assert diff["element"] == 1 and diff["index"] == [1]
    assert diff["values"] == ["4.0", "4.5"]
    assert diff["differing_elements"] == 2 and diff["elements"] == 3
    assert verdict["verdict"] == "NONDETERMINISTIC"
    assert verdict["problems"] == [
        "runs differ: first at grad-allreduce/w0 at step 1 (replica 0): 2 of 3 elements differ, first at [1]: "
        "4.0 vs 4.5"
    ]


def test_negative_zero_is_a_difference(tmp_path: Path) -> None:
    """Bitwise: -0.0 and 0.0 compare equal as floats but are different bits, so different results."""
    a = run(tmp_path, "a", [[0.0, 1.0]])
    b = run(tmp_path, "b", [[-0.0, 1.0]])
    diff = replicas.compare_runs(a.payload(), str(a.path), b.payload(), str(b.path))
    assert diff is not None and diff["element"] == 0 and diff["values"] == ["0.0", "-0.0"]


def test_multi_index_of_the_first_differing_element(tmp_path: Path) -> None:
    a, b = Trace(tmp_path / "a.bin"), Trace(tmp_path / "b.bin")
    a.add("weights/w0", 0, 0, [0.0] * 6, shape=[2, 3])
    b.add("weights/w0", 0, 0, [0.0] * 5 + [1.0], shape=[2, 3])
    diff = replicas.compare_runs(a.payload(1), str(a.path), b.payload(1), str(b.path))
    assert diff is not None and diff["element"] == 5 and diff["index"] == [1, 2]


def test_replicas_that_disagree_within_one_run(tmp_path: Path) -> None:
    t = Trace(tmp_path / "t.bin")
    t.add("allreduce-sum", 0, 0, [1.0, 2.0])
    t.add("allreduce-sum", 0, 1, [1.0, 2.5])
    verdict = replicas.judge([(t.payload(), str(t.path)), (t.payload(), str(t.path))])
    bad = verdict["replicas_disagree"]
    assert bad["replicas"] == [0, 1] and bad["element"] == 1
    assert verdict["verdict"] == "NONDETERMINISTIC"
    assert verdict["problems"][0].startswith("replicas [0, 1] of one run disagree: allreduce-sum at step 0")


def test_a_changed_replica_count_is_caught(tmp_path: Path) -> None:
    a = run(tmp_path, "a", [[1.0, 2.0]])
    b = run(tmp_path, "b", [[1.0, 2.0]])
    verdict = replicas.judge([(a.payload(2), str(a.path)), (b.payload(3), str(b.path))])
    assert verdict["runs_equal"] is False
    assert "the replica count changed between runs (2 vs 3)" in verdict["problems"][0]


def test_a_collective_missing_in_the_other_run(tmp_path: Path) -> None:
    a = run(tmp_path, "a", [[1.0], [2.0]])
    b = run(tmp_path, "b", [[1.0]])
    diff = replicas.compare_runs(a.payload(), str(a.path), b.payload(), str(b.path))
    assert diff == {"name": "grad-allreduce/w0", "step": 1, "replica": 0, "detail": "missing in the other run"}


def worker_run(tmp_path: Path, name: str, task: int, values: list[float], final: str) -> tuple[dict, str]:
    t = Trace(tmp_path / f"{name}.bin")
    t.add("grad-allreduce/w0", 0, task, values)
    return t.payload(1, {str(task): final}, task_index=task), str(t.path)


def test_workers_agree_and_repeat(tmp_path: Path) -> None:
    h = "sha256:" + "b" * 64
    runs = [[worker_run(tmp_path, f"r{r}w{w}", w, [1.0, 2.0], h) for w in (0, 1)] for r in (0, 1)]
    verdict = replicas.compare_workers(runs)
    assert verdict["verdict"] == "deterministic"
    assert verdict["workers_equal"] is True and verdict["runs_equal"] is True
    assert verdict["replica_hashes"] == [{"0": h, "1": h}, {"0": h, "1": h}]


def test_a_worker_that_does_not_repeat(tmp_path: Path) -> None:
    h, g = "sha256:" + "b" * 64, "sha256:" + "c" * 64
    runs = [
        [worker_run(tmp_path, "r0w0", 0, [1.0, 2.0], h), worker_run(tmp_path, "r0w1", 1, [1.0, 2.0], h)],
        [worker_run(tmp_path, "r1w0", 0, [1.0, 2.5], g), worker_run(tmp_path, "r1w1", 1, [1.0, 2.5], g)],
    ]
    verdict = replicas.compare_workers(runs)
    assert verdict["workers_equal"] is True  # within each run the workers agree
    assert verdict["runs_equal"] is False
    assert verdict["first_difference"]["worker"] == 0 and verdict["first_difference"]["element"] == 1
    assert verdict["problems"] == [
        "worker 0 differs between runs: first at grad-allreduce/w0 at step 0 (replica 0): 1 of 2 elements "
        "differ, first at [1]: 2.0 vs 2.5",
        "worker 1 differs between runs: first at grad-allreduce/w0 at step 0 (replica 1): 1 of 2 elements "
        "differ, first at [1]: 2.0 vs 2.5",
    ]


def test_workers_that_disagree(tmp_path: Path) -> None:
    runs = [
        [
            worker_run(tmp_path, "w0", 0, [1.0], "sha256:" + "b" * 64),
            worker_run(tmp_path, "w1", 1, [1.0], "sha256:" + "c" * 64),
        ]
    ]
    verdict = replicas.compare_workers(runs)
    assert verdict["workers_equal"] is False and verdict["runs_equal"] is None
    assert verdict["problems"][0].startswith("run 1: workers disagree")


@given(st.lists(st.integers(min_value=1, max_value=6), min_size=1, max_size=4), st.data())
@settings(max_examples=examples(200), deadline=None)
def test_unravel_is_the_inverse_of_c_order(shape: list[int], data: st.DataObject) -> None:
    total = 1
    for d in shape:
        total *= d
    flat = data.draw(st.integers(min_value=0, max_value=total - 1))
    index = replicas._unravel(flat, shape)
    again = 0
    for i, d in zip(index, shape, strict=True):
        assert 0 <= i < d
        again = again * d + i
    assert again == flat


@pytest.mark.parametrize("text", ["0", "1", "-2", "two"])
def test_replica_count_refuses_what_has_nothing_to_reduce(text: str) -> None:
    import argparse

    with pytest.raises(argparse.ArgumentTypeError):
        replicas.replica_count(text)


def test_free_ports_are_distinct() -> None:
    ports = replicas.free_ports(2)
    assert len(set(ports)) == 2 and all(p > 0 for p in ports)


def test_unknown_plant_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown hazard"):
        replicas.run_replicas(2, plant="cosmic-rays")


MULTI = {
    "model": replicas.MODEL,
    "replicas": 2,
    "plant": None,
    "mirrored": {
        "runs": 2,
        "replicas": [2, 2],
        "replica_hashes": [{"0": "sha256:" + "d" * 64, "1": "sha256:" + "d" * 64}] * 2,
        "final_losses": [2.0, 2.0],
        "runs_equal": True,
        "problems": [],
        "verdict": "deterministic",
        "devices": ["/cpu:0", "/cpu:1"],
        "device_class": "cpu:x86-64-v3;intra_op=2;inter_op=2;onednn=off",
        "tf_version": "2.21.0",
        "device_kind": "cpu (logical devices)",
        "cross_device_ops": "CollectiveAllReduce",
        "steps": 3,
        "traced": 66,
        "seconds": [12.0, 12.5],
    },
    "multi_worker": {
        "runs": 1,
        "workers": [2],
        "replica_hashes": [{"0": "sha256:" + "d" * 64, "1": "sha256:" + "d" * 64}],
        "runs_equal": None,
        "workers_equal": True,
        "problems": [],
        "verdict": "workers-agree",
        "communication": "RING",
        "resolver": "TFConfigClusterResolver",
        "device_class": "cpu:x86-64-v3;intra_op=2;inter_op=2;onednn=off",
        "steps": 3,
        "traced": 33,
        "seconds": [[13.0, 13.1]],
    },
    "problems": [],
    "seconds": 16.7,
}


def test_the_report_lines_of_a_passing_multi_replica_self_test() -> None:
    assert report.replica_lines(MULTI) == [
        "MirroredStrategy over 2 devices (cpu (logical devices), CollectiveAllReduce): equal in 2 fresh runs; "
        "every replica sha256:" + "d" * 64,
        "MultiWorkerMirroredStrategy, 2 workers on loopback (RING): workers agree, one run; every replica sha256:"
        + "d" * 64,
    ]


def test_a_failing_multi_replica_self_test_fails_the_self_test() -> None:
    failing = dict(MULTI, multi_worker={"error": "multi-worker: envpin.probe.replicas exited with status 1: boom"})
    found = problems({"checks": [], "golden": {}, "hygiene": [], "replicas": failing})
    assert found == ["MultiWorkerMirroredStrategy: multi-worker: envpin.probe.replicas exited with status 1: boom"]
    assert report.replica_lines(failing)[1] == (
        "MultiWorkerMirroredStrategy: could not run: multi-worker: envpin.probe.replicas exited with status 1: boom"
    )
    skipped = problems({"checks": [], "golden": {}, "hygiene": [], "replicas": {"skipped": "needs TF 2.4"}})
    assert skipped == ["multi-replica self-test could not run: needs TF 2.4"]


def test_the_schema_takes_the_multi_replica_section() -> None:
    import jsonschema

    validator = jsonschema.Draft7Validator({"$ref": "#/definitions/replicas", "definitions": SCHEMA["definitions"]})
    assert not list(validator.iter_errors(MULTI))
    assert list(validator.iter_errors(dict(MULTI, replicas=1)))


def test_cli_refuses_a_replica_count_with_nothing_to_reduce(cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("selftest", "--replicas", "1")
    assert res.code == 2
    assert res.stderr.splitlines()[0] == (
        "error: --replicas must be 2 or more (one replica has nothing to all-reduce), not 1"
    )
    assert res.stderr.splitlines()[1].startswith("hint: ")


def test_cli_probe_replicas_needs_the_self_test(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    res = cli("probe", "--replicas", "2", "-o", str(tmp_path / "r.json"))
    assert res.code == 2
    assert res.stderr.splitlines() == [
        "error: --replicas adds to the self-test, which runs on this machine only with --selftest",
        "hint: add --selftest, or drop --replicas",
    ]
    assert not (tmp_path / "r.json").exists()


# --------------------------------------------------------------------------------------- per-replica golden


def _with_replicas(report: dict, mirrored_hash: str | None, worker_hash: str | None = None) -> dict:
    """A report whose self-test ran the multi-replica part: each replica of the first run holding `*_hash`
    (None: the replicas disagree)."""
    cls = report["selftest"]["golden"]["device_class"]

    def hashes(h: str | None, n: int) -> list[dict]:
        return [{str(r): (h or "sha256:" + f"{r}" * 64) for r in range(n)}]

    part = dict(MULTI["mirrored"], replica_hashes=hashes(mirrored_hash, 2), device_class=cls)
    worker = dict(MULTI["multi_worker"], replica_hashes=hashes(worker_hash or mirrored_hash, 2), device_class=cls)
    report["selftest"]["replicas"] = dict(MULTI, mirrored=part, multi_worker=worker)
    return report


def test_a_report_has_one_golden_hash_per_set_up() -> None:
    from envpin.probe import fields
    from tests.fleetdata import A100, HASH_1, HASH_2, node

    cls = f"gpu:{A100};cc=8.0;count=1"
    report = _with_replicas(node("n1"), HASH_2)
    assert fields.golden_fields(report) == [
        (f"golden.{cls}", HASH_1),
        (f"golden.{cls};replicas=2", HASH_2),
        (f"golden.{cls};workers=2", HASH_2),
    ]
    assert fields.base_class(f"{cls};replicas=2") == cls == fields.base_class(cls)
    # replicas that disagree have no golden hash: the self-test's verdict already fails
    assert [k for k, _ in fields.golden_fields(_with_replicas(node("n2"), None))] == [f"golden.{cls}"]


def test_the_lock_records_and_checks_the_per_replica_hash() -> None:
    from envpin.environment.lockfile import Lock
    from envpin.environment.plan import make_plan
    from envpin.environment.render import render
    from envpin.probe import fields
    from tests.fleetdata import A100, HASH_2, HASH_3, node

    cls = f"gpu:{A100};cc=8.0;count=1"
    plan = make_plan(ngc="20.02", tf="2.1")
    lock, done = Lock.from_plan(plan, render(plan)).record(_with_replicas(node("n1"), HASH_2))
    assert done[-3:] == [
        f"golden hash for {cls}",
        f"golden hash for {cls};replicas=2",
        f"golden hash for {cls};workers=2",
    ]
    diffs, notes = lock.check_golden(_with_replicas(node("n2"), HASH_3, HASH_2))
    assert notes == []
    assert [(d.key, d.severity) for d in diffs] == [(f"golden.{cls};replicas=2", fields.BREAKING)]
    # a report without the multi-replica part is checked on what it has
    assert lock.check_golden(node("n3")) == ([], [])


def test_the_fleet_compares_per_replica_hashes_within_a_class() -> None:
    from envpin.fleet.aggregate import aggregate
    from tests.fleetdata import A100, HASH_2, HASH_3, node

    cls = f"gpu:{A100};cc=8.0;count=1"
    reports = [_with_replicas(node("a1"), HASH_2), _with_replicas(node("a2"), HASH_3, HASH_2), node("a3")]
    res = aggregate([(r["host"]["hostname"]["value"], r) for r in reports])
    groups = {g.device_class: g for g in res.golden}
    assert sorted(groups) == [cls, f"{cls};replicas=2", f"{cls};workers=2"]
    replicas = groups[f"{cls};replicas=2"]
    assert replicas.hashes == {HASH_2: ("a1",), HASH_3: ("a2",)} and replicas.unchecked == ("a3",)
    assert groups[f"{cls};workers=2"].consistent and groups[cls].consistent
    assert [s.key for s in res.spreads if s.golden] == [f"golden.{cls};replicas=2"]
    assert res.exit_code == 1
    assert res.node("a1").golden == res.node("a3").golden  # the node's own golden hash, not a per-replica one


def test_one_run_of_agreeing_workers_is_not_called_deterministic(tmp_path: Path) -> None:
    h = "sha256:" + "b" * 64
    verdict = replicas.compare_workers([[worker_run(tmp_path, f"w{w}", w, [1.0], h) for w in (0, 1)]])
    assert verdict["verdict"] == "workers-agree" and verdict["runs_equal"] is None and verdict["problems"] == []
