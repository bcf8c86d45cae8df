"""`fleet probe --slurm`'s node-side task run for real in its own process, as srun starts it on a node: the
probe archive on standard input, the task's /bin/sh start, its timeout, and its Python 3.6 syntax (vermin).
The commands it builds and what it reads back are tests/unit/test_slurm_jobs.py; tests/slurm runs it on a
real cluster."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envpin.environment.payload import payload
from envpin.fleet import slurm
from tests.conftest import REPO


def _sha() -> str:
    return hashlib.sha256(payload()).hexdigest()


def _run_task(
    stdin: bytes, sha: str, timeout: str, env: dict[str, str] | None = None, args: tuple[str, ...] = ("--no-selftest",)
) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-c", slurm.task_source(), sha, timeout, *args],
        input=stdin,
        capture_output=True,
        timeout=120,
        env={**os.environ, "SLURMD_NODENAME": "node-7", **(env or {})},
    )
    assert proc.returncode == 0, proc.stderr
    results, broken = slurm.parse_task_output(proc.stdout.decode())
    assert broken == {} and list(results) == ["node-7"]
    return results["node-7"]


def test_the_task_runs_the_probe_archive_from_stdin() -> None:
    result = _run_task(payload(), _sha(), "120", {"OMP_NUM_THREADS": "3"})
    o = slurm.outcome("node-7", result, None, [], False, 120)
    assert o.status == slurm.OK and o.data is not None
    assert o.data["env"]["OMP_NUM_THREADS"]["value"] == "3"


def test_a_report_with_a_failed_self_test_is_a_probed_node(tmp_path: Path) -> None:
    """Exit 1 with a report on stdout is the probe saying its self-test failed: the node was probed, and
    its report records how (a zip application standing in for a probe whose self-test fails)."""
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("__main__.py", "import sys\nsys.stdout.write('{\"probe_schema\": 1}')\nsys.exit(1)\n")
    archive = buf.getvalue()
    result = _run_task(archive, hashlib.sha256(archive).hexdigest(), "60", args=())
    assert result["status"] == "ok" and result["exit_code"] == 1 and result["report"] == '{"probe_schema": 1}'


def test_the_task_refuses_a_damaged_archive() -> None:
    result = _run_task(payload()[:-10], _sha(), "120")
    assert result["status"] == "failed" and "damaged" in str(result["error"])


def test_the_task_reports_its_own_timeout() -> None:
    result = _run_task(payload(), _sha(), "0.001")
    assert result["status"] == "timeout"
    o = slurm.outcome("node-7", result, None, [], False, 1)
    assert (o.status, o.error) == ("timed_out", "the probe did not finish within 0.001 s")


def test_node_task_runs_on_python36() -> None:
    vermin = Path(sys.executable).parent / "vermin"
    if not vermin.exists():
        pytest.skip("vermin is not installed next to this interpreter (pip install -e '.[test]')")
    task = REPO / "envpin" / "fleet" / "nodetask.py"
    proc = subprocess.run(
        [str(vermin), "-t=3.6-", "--no-tips", "--violations", str(task)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_missing_program_is_named_by_the_task_itself(tmp_path: Path) -> None:
    """The task's /bin/sh start checks the runtime is on PATH and says so on its node's line, which
    node_errors attributes; slurmstepd's own execve() line is not needed (it can be lost)."""
    task = slurm.task_command(_sha(), 60, image="/images/tf.sif", runtime="apptainer")
    proc = subprocess.run(
        task, input=b"", capture_output=True, timeout=60, env={"PATH": str(tmp_path), "SLURMD_NODENAME": "node-7"}
    )
    assert proc.returncode == 127 and proc.stdout == b""
    errors = slurm.node_errors(
        proc.stderr.decode() + "srun: error: node-7: task 0: Exited with exit code 127\n", ["node-7", "node-8"]
    )
    assert errors == {
        "node-7": ["apptainer is not installed on the node (not found on PATH)", "task 0: Exited with exit code 127"]
    }


def test_the_task_start_execs_the_program_it_checked() -> None:
    """With the program on PATH the start is a plain exec: the task's result comes back as usual."""
    task = slurm.task_command(_sha(), 120, probe_args=["--no-selftest"])
    bindir = str(Path(sys.executable).parent)
    proc = subprocess.run(
        task,
        input=payload(),
        capture_output=True,
        timeout=120,
        env={**os.environ, "PATH": bindir + os.pathsep + os.environ.get("PATH", ""), "SLURMD_NODENAME": "node-7"},
    )
    assert proc.returncode == 0, proc.stderr
    results, broken = slurm.parse_task_output(proc.stdout.decode())
    assert broken == {} and results["node-7"]["status"] == "ok"


def test_srun_output_is_read_line_by_line_as_it_comes() -> None:
    """What `fleet probe` reads of srun while it runs (each line to a callback: nodes counted as their results
    come in), then all of its stdout and stderr as communicate() gives them; a process past its limit is
    stopped and said to be."""
    lines = [*slurm_lines("n1"), *slurm_lines("n2")]
    script = (
        "import sys\n"
        "data = sys.stdin.buffer.read()\n"
        "for line in sys.argv[1:]:\n"
        "    print(line, flush=True)\n"
        "sys.stderr.write('read %d bytes\\n' % len(data))\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script, *lines], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    arrivals, counts = slurm.Arrivals(), []

    def arrived(line: bytes) -> None:
        if arrivals.add(line.decode()):
            counts.append(len(arrivals.whole))

    out, err, timed_out = slurm.communicate(proc, b"x" * 200_000, 60, arrived)  # more than a pipe holds
    assert (counts, timed_out) == ([1, 2], False)
    assert out.decode().splitlines() == lines and err == b"read 200000 bytes\n"
    sleeper = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert slurm.communicate(sleeper, b"", 0.2, lambda _line: None)[2] is True
    assert sleeper.returncode is not None


def slurm_lines(node: str) -> list[str]:
    from envpin.fleet import nodetask

    return nodetask.frame(node, {"status": "ok", "report": os.urandom(1500).hex()})
