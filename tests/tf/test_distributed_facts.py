"""The distributed recipe's measured facts, measured again (docs/distributed.md, "Measured"; the table's source
envpin-measured-distributed): MirroredStrategy over logical CPU devices, each case in fresh processes. A
Generator made under the scope gives replica 0 the single-device stream and replica 1 another; a model trained on
1 and on 2 replicas ends with other weights; each case repeats itself run to run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

CASE = Path(__file__).resolve().parent / "distributed_case.py"


def _run(case: str, replicas: int) -> dict[str, object]:
    proc = subprocess.run([sys.executable, str(CASE), case, str(replicas)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_generator_under_the_scope_is_one_stream_per_replica_id() -> None:
    one = _run("gen_in_scope", 1)["replica_streams"]
    two = _run("gen_in_scope", 2)["replica_streams"]
    assert isinstance(one, list) and isinstance(two, list)
    assert two[0] == one[0] and two[1] != two[0]  # replica 0 draws the single-device stream
    assert _run("gen_in_scope", 2)["replica_streams"] == two  # and again in a fresh process


@pytest.mark.parametrize("case", ["gen_outside_fn", "global_gen_fn"])
def test_a_shared_generator_gives_the_replicas_other_numbers(case: str) -> None:
    one = _run(case, 1)["replica_streams"]
    two = _run(case, 2)["replica_streams"]
    assert isinstance(one, list) and isinstance(two, list)
    assert one[0] not in two and two[0] != two[1]


def test_the_replica_count_changes_the_trained_weights() -> None:
    one, two = _run("train", 1)["weights"], _run("train", 2)["weights"]
    assert one != two
    assert _run("train", 2)["weights"] == two
