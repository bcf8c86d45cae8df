"""`fleet probe --slurm` without a cluster: the commands it builds, what it reads back, the node-side task.

The task itself (envpin/fleet/nodetask.py) runs in its own process in tests/cli/test_slurm_jobs.py; the
cluster tier (tests/slurm) runs the same through a real Slurm.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envpin.environment.payload import payload
from envpin.errors import SlurmError, UsageError
from envpin.fleet import nodetask, slurm
from tests.props import examples

SINFO = """\
n1|gpu|idle|none
n2|gpu|mixed|none
n3|gpu|drained|disk check
n4|gpu|down*|Not responding
n1|cpu*|idle|none
n2|cpu*|idle~|none
"""


def _sha() -> str:
    return hashlib.sha256(payload()).hexdigest()


# --------------------------------------------------------------------------- sinfo and the allocation plan


def test_sinfo_partitions_and_default() -> None:
    default, parts = slurm.parse_sinfo(SINFO)
    assert default == "cpu"
    assert [n.name for n in parts["gpu"]] == ["n1", "n2", "n3", "n4"]
    assert parts["gpu"][2] == slurm.PartitionNode("n3", "drained", "disk check")


@pytest.mark.parametrize(
    ("state", "usable"),
    [
        ("idle", True),
        ("mixed", True),
        ("allocated", True),
        ("completing", True),
        ("idle~", True),
        ("idle*", False),
        ("down*", False),
        ("down", False),
        ("drained", False),
        ("draining", False),
        ("drained*", False),
        ("fail", False),
        ("maint", False),
        ("unknown*", False),
        ("mixed-", True),
    ],
)
def test_which_states_slurm_can_give(state: str, usable: bool) -> None:
    assert slurm.PartitionNode("n", state).usable is usable


def test_plan_every_node_reports_the_unusable_ones() -> None:
    p = slurm.plan(SINFO, "gpu", None)
    assert (p.partition, p.count, p.nodelist) == ("gpu", 2, ("n1", "n2"))
    assert [n.name for n in p.left_out] == ["n3", "n4"]
    assert p.left_out[0].why_not == "not probed: Slurm lists the node as drained (disk check)"
    assert p.left_out[1].why_not == "not probed: Slurm lists the node as down and not responding (Not responding)"


def test_plan_default_partition_and_a_count() -> None:
    assert slurm.plan(SINFO, None, None).nodelist == ("n1", "n2")
    assert slurm.plan(SINFO, "gpu", 2) == slurm.Plan("gpu", 2, None, ())


@pytest.mark.parametrize(
    ("partition", "nodes", "message"),
    [
        ("gpu", 3, "`nodes` 3, but partition gpu has 2 usable node(s) (2 down or drained: n3, n4)"),
        ("gpu", 0, "`nodes` must be at least 1"),
        ("big", None, "partition big has no nodes"),
    ],
)
def test_plan_refuses(partition: str, nodes: int | None, message: str) -> None:
    """Called from Python, the parameters are named as the api names them (the CLI says --nodes)."""
    with pytest.raises(UsageError) as exc:
        slurm.plan(SINFO, partition, nodes)
    assert exc.value.message == message and exc.value.hint


def test_plan_without_a_default_partition() -> None:
    with pytest.raises(UsageError, match="no default partition") as exc:
        slurm.plan("n1|gpu|idle|none\n", None, None)
    assert "gpu" in (exc.value.hint or "")


def test_sinfo_garbage_is_an_error() -> None:
    with pytest.raises(SlurmError):
        slurm.parse_sinfo("this is not sinfo\n")


# --------------------------------------------------------------------------- commands


def test_salloc_command() -> None:
    p = slurm.Plan("gpu", 2, ("n1", "n2"), ())
    assert slurm.salloc_command(p, 300, ["--account=ml"]) == [
        "salloc",
        "--no-shell",
        "--partition=gpu",
        "--nodes=2",
        "--ntasks-per-node=1",
        "--job-name=envpin-fleet-probe",
        "--time=7",
        "--immediate=300",
        "--nodelist=n1,n2",
        "--account=ml",
    ]
    assert "--nodelist" not in " ".join(slurm.salloc_command(slurm.Plan("gpu", 5, None, ()), 30))
    tagged = slurm.salloc_command(slurm.Plan("gpu", 5, None, ()), 30, token="envpin-0123")
    assert "--comment=envpin-0123" in tagged


def test_srun_command_runs_one_task_per_node_with_stdin_for_all() -> None:
    task = slurm.task_command("ab" * 32, 300)
    assert task[:2] == ["/bin/sh", "-c"] and task[3] == "envpin-task"
    assert task[4:6] == ["python3", "-c"] and task[6] == slurm.task_source() and task[7:] == ["ab" * 32, "300"]
    assert slurm.srun_command("42", 3, task) == [
        "srun",
        "--jobid=42",
        "--nodes=3",
        "--ntasks=3",
        "--ntasks-per-node=1",
        "--input=all",
        "--chdir=/tmp",
        "--mpi=none",
        "--kill-on-bad-exit=0",
        "--job-name=envpin-fleet-probe",
        *task,
    ]


@pytest.mark.parametrize(
    ("image", "runtime", "runs"),
    [
        (
            "nvcr.io/nvidia/tensorflow:23.03-tf2-py3",
            "apptainer",
            ["apptainer", "exec", "--nv", "docker://nvcr.io/nvidia/tensorflow:23.03-tf2-py3"],
        ),
        ("/shared/images/tf-23.03.sif", "apptainer", ["apptainer", "exec", "--nv", "/shared/images/tf-23.03.sif"]),
        (
            "oras://registry.example.com/tf:1",
            "singularity",
            ["singularity", "exec", "--nv", "oras://registry.example.com/tf:1"],
        ),
    ],
)
def test_apptainer_and_singularity_run_the_task_inside_the_image(image: str, runtime: str, runs: list[str]) -> None:
    task = slurm.task_command("ab" * 32, 60, image=image, runtime=runtime)
    assert task[4:8] == runs and task[8:10] == ["python3", "-c"]
    assert "--container-image" not in " ".join(slurm.srun_command("1", 1, task, image=image, runtime=runtime))


@pytest.mark.parametrize(
    ("image", "pyxis"),
    [
        ("nvcr.io/nvidia/tensorflow:23.03-tf2-py3", "nvcr.io#nvidia/tensorflow:23.03-tf2-py3"),
        ("127.0.0.1:5000/nvidia/tensorflow:20.02-tf2-py3", "127.0.0.1:5000#nvidia/tensorflow:20.02-tf2-py3"),
        ("ubuntu:22.04", "ubuntu:22.04"),
        ("docker.io/nvidia/cuda:12.2.0-base-ubuntu22.04", "nvidia/cuda:12.2.0-base-ubuntu22.04"),
        ("nvcr.io#nvidia/pytorch:24.01-py3", "nvcr.io#nvidia/pytorch:24.01-py3"),
        ("/scratch/tf.sqsh", "/scratch/tf.sqsh"),
    ],
)
def test_pyxis_gets_the_image_as_an_srun_option(image: str, pyxis: str) -> None:
    task = slurm.task_command("ab" * 32, 60, image=image, runtime="pyxis")
    assert task[4:6] == ["python3", "-c"]
    cmd = slurm.srun_command("7", 2, task, image=image, runtime="pyxis")
    assert cmd[cmd.index("--job-name=envpin-fleet-probe") + 1] == "--container-image=" + pyxis
    assert cmd[-len(task) :] == task


def test_a_bad_image_reference_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="not an image reference"):
        slurm.task_command("ab" * 32, 60, image="Not An Image", runtime="apptainer")


# --------------------------------------------------------------------------- what comes back


def test_job_id_from_salloc() -> None:
    assert slurm.parse_job_id("salloc: Pending job allocation 12\nsalloc: Granted job allocation 12\n") == "12"
    assert slurm.parse_job_id("salloc: error: Unable to allocate resources: Invalid partition name") is None


def test_node_errors_by_node() -> None:
    text = (
        "slurmstepd-n2: error: execve(): python3: No such file or directory\n"
        "srun: error: n2: task 1: Exited with exit code 2\n"
        "srun: launch/slurm: _step_signal: Terminating StepId=5.0\n"
    )
    assert slurm.node_errors(text, ["n1", "n2"]) == {
        "n2": ["execve(): python3: No such file or directory", "task 1: Exited with exit code 2"]
    }


def test_a_node_that_cannot_launch_ends_every_task() -> None:
    """srun's real output when one node's slurmd does not answer: the step is aborted everywhere."""
    text = (
        "srun: error: slurm_receive_msgs: [[172.24.0.5]:6818] failed: Socket timed out on send/recv operation\n"
        "srun: error: Task launch for StepId=18.0 failed on node n3: Socket timed out on send/recv operation\n"
        "srun: error: Application launch failed: Socket timed out on send/recv operation\n"
        "srun: Job step aborted: Waiting up to 7 seconds for job step to finish.\n"
        "slurmstepd-n1: error: *** STEP 18.0 ON n1 CANCELLED AT 2026-11-23T14:19:40 ***\n"
        "srun: error: n2: task 1: Killed\n"
        "srun: error: n1: task 0: Killed\n"
    )
    errors = slurm.node_errors(text, ["n1", "n2", "n3"])
    general = [
        "srun: slurm_receive_msgs: [[172.24.0.5]:6818] failed: Socket timed out on send/recv operation",
        "srun: Application launch failed: Socket timed out on send/recv operation",
    ]
    assert errors["n3"] == ["task launch failed: Socket timed out on send/recv operation", *general]
    assert errors["n2"] == ["task 1: Killed", *general]
    o = slurm.outcome("n3", None, None, errors["n3"], False, 10)
    assert (o.status, o.error) == (
        "failed",
        "no result from the node: task launch failed: Socket timed out on send/recv operation; " + "; ".join(general),
    )


def _lines(node: str, result: dict[str, object]) -> list[str]:
    return nodetask.frame(node, result)


def test_interleaved_lines_of_several_nodes_are_reassembled() -> None:
    big = {"status": "ok", "report": "x" * 5000 + os.urandom(3000).hex()}
    a, b = _lines("n1", big), _lines("n2", {"status": "failed", "error": "boom"})
    assert len(a) > 3 and all(len(line) < 1000 for line in a)
    mixed = ["prolog says hi", *[x for pair in zip(a, b + [""] * (len(a) - len(b)), strict=True) for x in pair if x]]
    results, broken = slurm.parse_task_output("\n".join(mixed))
    assert results == {"n1": big, "n2": {"status": "failed", "error": "boom"}} and broken == {}


def test_missing_and_damaged_lines_are_named() -> None:
    lines = _lines("n1", {"status": "ok", "report": os.urandom(4000).hex()})
    results, broken = slurm.parse_task_output("\n".join(lines[:1] + lines[2:]))
    assert results == {} and broken["n1"].startswith("the node's result arrived incomplete")
    damaged = [*lines[:-1], lines[-1][:-2] + ("AA" if not lines[-1].endswith("AA") else "BB")]
    results, broken = slurm.parse_task_output("\n".join(damaged))
    assert results == {} and "damaged" in broken["n1"]


def test_a_node_counts_once_when_all_its_lines_are_in() -> None:
    """While srun runs, each node whose result lines have all come in counts once (progress: k of n nodes)."""
    a, b = _lines("n1", {"status": "ok", "report": os.urandom(2000).hex()}), _lines("n2", {"status": "ok"})
    arrivals = slurm.Arrivals()
    # n2's one line comes in before n1's last; a line that comes twice, or another program's, counts nothing
    completed = [arrivals.add(line) for line in ["prolog says hi", a[0], b[0], *a[1:], a[0]]]
    assert completed == [False, False, True, *[False] * (len(a) - 2), True, False]
    assert arrivals.whole == {"n1", "n2"}
    missing = slurm.Arrivals()
    assert not any(missing.add(line) for line in a[:-1]) and missing.whole == set()


@settings(max_examples=examples(50), deadline=None)
@given(
    results=st.dictionaries(
        st.from_regex(r"[a-z][a-z0-9-]{0,12}", fullmatch=True),
        st.dictionaries(st.text(max_size=8), st.text(max_size=2000), max_size=4),
        max_size=4,
    ),
    seed=st.randoms(use_true_random=False),
)
def test_any_interleaving_round_trips(results: dict[str, dict[str, str]], seed) -> None:  # type: ignore[no-untyped-def]
    """Whatever the order srun delivers whole lines in, every node's result comes back unchanged."""
    lines = [line for node, res in results.items() for line in nodetask.frame(node, res)]
    seed.shuffle(lines)
    got, broken = slurm.parse_task_output("\n".join(lines))
    assert got == results and broken == {}


# --------------------------------------------------------------------------- the node-side task's command


def test_the_task_command_passes_the_self_test_choice() -> None:
    task = slurm.task_command("ab" * 32, 60, probe_args=["--no-selftest", "--quick"])
    assert task[-2:] == ["--no-selftest", "--quick"]


# --------------------------------------------------------------------------- outcomes and the comparison


@pytest.mark.parametrize(
    ("result", "broken", "errors", "timed_out", "status", "error"),
    [
        (None, None, [], True, "timed_out", "no result within 70 s"),
        (
            None,
            None,
            ["task 1: Exited with exit code 2"],
            False,
            "failed",
            "no result from the node: task 1: Exited with exit code 2",
        ),
        (
            None,
            "the node's result arrived damaged (checksum mismatch)",
            [],
            True,
            "failed",
            "the node's result arrived damaged (checksum mismatch)",
        ),
        (
            {"status": "ok", "report": "{not json"},
            None,
            [],
            False,
            "failed",
            "the probe's output is not valid JSON (line 1, column 2: "
            "Expecting property name enclosed in double quotes)",
        ),
        (
            {"status": "ok", "report": "[]"},
            None,
            [],
            False,
            "failed",
            "the report of n1 is not a probe report (a JSON object was expected)",
        ),
        (
            {"status": "failed", "error": "the probe exited with status 2: x"},
            None,
            [],
            False,
            "failed",
            "the probe exited with status 2: x",
        ),
    ],
)
def test_no_result_is_never_ok(result, broken, errors, timed_out, status, error) -> None:  # type: ignore[no-untyped-def]
    o = slurm.outcome("n1", result, broken, errors, timed_out, 10)
    assert (o.status, o.error) == (status, error)


def test_the_fleet_result_names_the_node_and_the_breaking_field() -> None:
    """The nodes go through envpin.fleet.aggregate, as `fleet report` compares them; none is dropped."""
    from envpin.probe import collect

    same = collect(environ={"PATH": "/usr/bin"})
    other = collect(environ={"PATH": "/usr/bin", "OMP_NUM_THREADS": "3"})
    outcomes = [
        slurm.NodeOutcome("a", "ok", data=same),
        slurm.NodeOutcome("b", "ok", data=other),
        slurm.NodeOutcome("c", "ok", data=same),
        slurm.NodeOutcome("d", "timed_out", error="late"),
    ]
    result = slurm.fleet_result(outcomes)
    assert [k.nodes for k in result.classes if k.reference] == [("a", "c")]
    assert result.outliers == ("b",)
    spread = next(s for s in result.spreads if s.key == "env.OMP_NUM_THREADS")
    assert spread.severity == "breaking"
    assert [(n.name, n.status, n.reason) for n in result.nodes if n.status != "ok"] == [("d", "timed_out", "late")]
    assert result.exit_code == 1


def test_file_names_for_node_names() -> None:
    assert slurm.safe_file_name("gpu-node-017") == "gpu-node-017"
    assert slurm.safe_file_name("../etc") == "_.._etc"
    assert slurm.safe_file_name("a/b c") == "a_b_c"


# --------------------------------------------------------------------------- the CLI's usage errors


def test_fleet_probe_needs_a_launcher(cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("fleet", "probe")
    assert res.code == 2 and "error: fleet probe needs to know how to reach the nodes" in res.stderr
    assert "hint: add --slurm" in res.stderr


def test_runtime_without_image(cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("fleet", "probe", "--slurm", "--runtime", "pyxis")
    assert res.code == 2 and "--runtime chooses how --image runs" in res.stderr


def test_no_slurm_on_path(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("PATH", str(tmp_path))
    res = cli("fleet", "probe", "--slurm", "--out", str(tmp_path / "reports"))
    assert res.code == 2
    assert "error: Slurm's client commands are not on PATH (missing: sinfo, salloc, srun" in res.stderr
    assert "hint: run this on a login node" in res.stderr and not (tmp_path / "reports").exists()
