"""`envpin fleet probe --slurm`: one probe task on each node of a Slurm partition, one report per node.

What it assumes of a cluster: Slurm's client commands on this (login) node, and that the nodes can open
connections back to it -- what every interactive `srun` needs. It assumes no shared storage and nothing
installed on the nodes but a python3 (or, with --image, a container runtime and an image that has one):

1. `sinfo` lists the partition's nodes (the default partition unless --partition); without --nodes every
   node is a target, and nodes Slurm cannot give (down, drained, not responding) are reported as failed
   with their state and reason, never left out;
2. `salloc --no-shell` allocates the nodes and returns at once with a job id (bounded by --immediate);
3. `srun --jobid` starts exactly one task per node; srun's standard input, the probe archive envpin.pyz,
   is broadcast to every task, which runs `envpin.fleet.nodetask`: the probe under a time limit, its
   report sent back through srun's standard output in checksummed lines (the module says how);
4. `scancel` releases the allocation, also when envpin is interrupted.

sbatch is not used on purpose: a batch script runs on a compute node, so its output could only come back
through a shared filesystem.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import math
import re
import secrets
import shutil
import subprocess
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envpin.errors import ReportError, SlurmError, UsageError, param
from envpin.files.read import parse_json
from envpin.fleet.aggregate import FAILED, OK, TIMED_OUT  # a node's outcome: the fleet report's statuses
from envpin.fleet.inputs import ERROR_SUFFIX, error_file_text  # the error file `fleet report` reads back
from envpin.record import ProgressCallback, ProgressEvent, Value

if TYPE_CHECKING:
    from envpin.fleet.aggregate import FleetResult
    from envpin.fleet.multiworker import MultiWorker
    from envpin.portable.imageref import ImageRef

CLIENTS = ("sinfo", "salloc", "srun", "squeue", "scontrol", "scancel")
#: Container runtimes for --image: the first two run inside the task, pyxis is an srun plugin.
RUNTIMES = ("apptainer", "singularity", "pyxis")
JOB_NAME = "envpin-fleet-probe"
DEFAULT_TIMEOUT_S = 300
#: `envpin fleet selftest --slurm`: its job name, its node count and time limit unless given.
SELFTEST_JOB_NAME = "envpin-fleet-selftest"
SELFTEST_NODES = 2
SELFTEST_TIMEOUT_S = 600
#: srun gets this long beyond the probe's own limit (archive transfer, interpreter and container start).
GRACE_S = 60
SINFO_FORMAT = "%N|%P|%T|%E"
#: Node states (sinfo %T, long form) in which Slurm gives a node to no new job.
UNUSABLE_STATES = (
    "down",
    "drained",
    "draining",
    "fail",
    "failing",
    "future",
    "inval",
    "maint",
    "unknown",
    "reboot_issued",
    "reboot_requested",
    "powering_down",
    "power_down",
)
#: What the node-side task says when the probe ran past its time (envpin/fleet/nodetask.py, protocol 1).
_TASK_TIMEOUT = "timeout"
_STATE_FLAGS = "*~#!%$@^-"
_JOB_ID = re.compile(r"job allocation (\d+)")
_SRUN_NODE_LINE = re.compile(r"^(?:srun: error: ([^\s:]+): (.*)|slurmstepd-([^\s:]+): error: (.*))$")
_SRUN_LAUNCH = re.compile(r"^srun: error: Task launch for \S+ failed on node ([^\s:]+): (.*)$")
# The task's own line when the program it starts (python3, the container runtime) is not on the node's PATH.
_TASK_ERROR = re.compile(r"^@envpin-task-error ([^\s:]+): (.*)$")
# Checks before exec: when execve fails, slurmstepd's "execve(): ...: No such file or directory" can be lost
# (srun may end the step before it arrives), while a line the task itself writes always arrives. The failing
# task still reads the archive srun sends it to the end: a task that leaves its standard input unread makes
# srun's write fail, and srun then aborts the whole step ("io error with slurmstepd"), every node's task with it.
_START = (
    'command -v "$1" >/dev/null 2>&1 || { echo "@envpin-task-error ${SLURMD_NODENAME:-$(uname -n)}: '
    '$1 is not installed on the node (not found on PATH)" >&2; cat >/dev/null; exit 127; }; exec "$@"'
)


@dataclass(frozen=True, slots=True)
class PartitionNode(Value):
    """One node as sinfo lists it: name, state (long form, with Slurm's flag characters) and reason."""

    name: str
    state: str
    reason: str = ""

    @property
    def usable(self) -> bool:
        """Slurm could give this node to a new job now ('*' marks a node that does not respond)."""
        base = self.state.rstrip(_STATE_FLAGS)
        return not self.state.endswith("*") and base not in UNUSABLE_STATES and "drain" not in base

    @property
    def why_not(self) -> str:
        reason = f" ({self.reason})" if self.reason and self.reason != "none" else ""
        shown = self.state.rstrip(_STATE_FLAGS) + (" and not responding" if self.state.endswith("*") else "")
        return f"not probed: Slurm lists the node as {shown}{reason}"


@dataclass(frozen=True, slots=True)
class NodeOutcome(Value):
    """What became of one node: ok with its report, or failed / timed_out with the reason."""

    node: str
    status: str
    report: Path | None = None
    error: str | None = None
    data: dict[str, Any] | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class Plan(Value):
    """The allocation to ask for: the partition, the nodes (None: any `count` nodes) and who is left out."""

    partition: str
    count: int
    nodelist: tuple[str, ...] | None
    left_out: tuple[PartitionNode, ...]


# --------------------------------------------------------------------------- pure parts (unit-tested)


def parse_sinfo(text: str) -> tuple[str | None, dict[str, list[PartitionNode]]]:
    """`sinfo -h -N -o '%N|%P|%T|%E'` -> (default partition, partition -> its nodes in sinfo's order)."""
    default = None
    parts: dict[str, list[PartitionNode]] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        cols = line.split("|", 3)
        if len(cols) < 3:
            raise SlurmError(f"cannot read sinfo's line {line!r}", hint="is this a Slurm client?")
        name, partition, state = cols[0].strip(), cols[1].strip(), cols[2].strip()
        if partition.endswith("*"):
            partition = partition[:-1]
            default = partition
        nodes = parts.setdefault(partition, [])
        if all(n.name != name for n in nodes):
            nodes.append(PartitionNode(name, state, cols[3].strip() if len(cols) > 3 else ""))
    return default, parts


def plan(sinfo_text: str, partition: str | None, nodes: int | None) -> Plan:
    """Which nodes to allocate: all usable nodes of the partition (the others are left out and reported),
    or any `nodes` of them."""
    default, parts = parse_sinfo(sinfo_text)
    name = partition or default
    if name is None:
        raise UsageError(
            "this cluster has no default partition",
            hint=f"name one with {param('partition')} ({', '.join(sorted(parts)) or 'sinfo lists none'})",
        )
    if name not in parts:
        raise UsageError(f"partition {name} has no nodes", hint=f"see `sinfo`; choose one with {param('partition')}")
    listed = parts[name]
    usable = [n for n in listed if n.usable]
    if nodes is None:
        if not usable:
            return Plan(name, 0, (), tuple(listed))
        return Plan(name, len(usable), tuple(n.name for n in usable), tuple(n for n in listed if not n.usable))
    if nodes < 1:
        raise UsageError(
            f"{param('nodes')} must be at least 1", hint="leave it out to probe every node of the partition"
        )
    if nodes > len(usable):
        down = [n.name for n in listed if not n.usable]
        raise UsageError(
            f"{param('nodes')} {nodes}, but partition {name} has {len(usable)} usable node(s)"
            + (f" ({len(down)} down or drained: {', '.join(down)})" if down else ""),
            hint=f"ask for fewer, or leave {param('nodes')} out to probe (and report) every node",
        )
    return Plan(name, nodes, None, ())


def apptainer_image(image: str) -> str:
    """What `apptainer exec` takes: a SIF file or URI as given, a registry reference as docker://REF."""
    if "://" in image or image.endswith(".sif") or image.startswith(("/", "./", "../")):
        return image
    _image_ref(image)
    return "docker://" + image


def pyxis_image(image: str) -> str:
    """What `srun --container-image` (pyxis/enroot) takes: [REGISTRY#]IMAGE[:TAG] or a squashfs path."""
    if "#" in image or image.endswith(".sqsh") or image.startswith(("/", "./", "../")):
        return image
    from envpin.portable.imageref import DOCKER_HUB

    ref = _image_ref(image)
    if ref.registry == DOCKER_HUB:
        return ref.familiar
    return (
        f"{ref.registry}#{ref.repository}"
        + (f":{ref.tag}" if ref.tag else "")
        + (f"@{ref.digest}" if ref.digest else "")
    )


def _image_ref(image: str) -> ImageRef:
    from envpin.portable import imageref

    try:
        return imageref.parse(image)
    except imageref.RefError as exc:
        raise UsageError(
            exc.message, hint="give a registry reference, a .sif/.sqsh file or a URI (docker://, oras://, library://)"
        ) from None


def task_source() -> str:
    """The node-side task's source, passed to `python3 -c` (envpin/fleet/nodetask.py)."""
    return (Path(__file__).resolve().parent / "nodetask.py").read_text(encoding="utf-8")


def task_command(
    payload_sha256: str,
    timeout: int,
    *,
    image: str | None = None,
    runtime: str = "apptainer",
    probe_args: Sequence[str] = (),
    python: str = "python3",
) -> list[str]:
    """The command each task runs: the node-side task under `python` (python3 from the node's PATH), inside
    `image` when given. The probe runs the determinism self-test by default where TensorFlow is importable
    (probe_args: --no-selftest, --quick; or the multi-worker self-test's --workers ..., nodetask.WORKERS).
    /bin/sh starts it only after checking that the program is on the node's PATH (_START)."""
    python_cmd = [python, "-c", task_source(), payload_sha256, str(timeout), *probe_args]
    if image is None or runtime == "pyxis":
        return ["/bin/sh", "-c", _START, "envpin-task", *python_cmd]
    # --nv binds the node's NVIDIA driver and devices into the container (a warning on a node without GPUs).
    return ["/bin/sh", "-c", _START, "envpin-task", runtime, "exec", "--nv", apptainer_image(image), *python_cmd]


def worker_task_args(runs: int, port_base: int, steps: int | None) -> list[str]:
    """The node-side task's options for the multi-worker self-test (envpin.fleet.nodetask --workers): `runs`
    runs of one MultiWorkerMirroredStrategy worker per node, its cluster from SlurmClusterResolver."""
    from envpin.fleet.nodetask import WORKERS

    return [WORKERS, str(runs), str(port_base), "--resolver", "slurm", *(["--steps", str(steps)] if steps else [])]


def salloc_command(
    p: Plan, timeout: int, extra: Sequence[str] = (), token: str | None = None, job_name: str = JOB_NAME
) -> list[str]:
    """Allocate the nodes and return at once (--no-shell); give up when Slurm cannot within `timeout`.
    The time limit outlives the probe, so the allocation never ends under a running task. `token` goes into
    the job's comment, so an interrupted run finds its job before salloc has said its id (release)."""
    minutes = math.ceil((timeout + GRACE_S) / 60) + 1
    cmd = [
        "salloc",
        "--no-shell",
        f"--partition={p.partition}",
        f"--nodes={p.count}",
        "--ntasks-per-node=1",
        f"--job-name={job_name}",
        f"--time={minutes}",
        f"--immediate={timeout}",
    ]
    if token is not None:
        cmd.append(f"--comment={token}")
    if p.nodelist is not None:
        cmd.append("--nodelist=" + ",".join(p.nodelist))
    return [*cmd, *extra]


def allocate(cmd: list[str], timeout: float, token: str) -> subprocess.CompletedProcess[str]:
    """Run salloc. Interrupted (Ctrl-C, a signal), it leaves no job behind: salloc gets SIGINT, with which it
    withdraws a pending request, and any job it was granted, or that carries `token` in its comment, is
    cancelled before the interrupt goes on. salloc's stderr goes to a file, so what it said before the
    interrupt (the job id) is never lost in a pipe."""
    import signal
    import tempfile

    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as err:
        try:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, text=True)
        except OSError as exc:
            raise SlurmError(f"cannot run salloc: {exc.strerror or exc}") from None
        try:
            code = proc.wait(timeout=timeout)
        except BaseException as exc:
            from envpin.portable.atomic import signals_held

            with signals_held():
                if proc.poll() is None:
                    proc.send_signal(signal.SIGINT)
                    try:
                        proc.wait(timeout=15)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        proc.wait()
                err.seek(0)
                release(token, err.read())
            if isinstance(exc, subprocess.TimeoutExpired):
                raise SlurmError(
                    f"salloc did not answer within {timeout:.0f} s", hint="is slurmctld up? try `scontrol ping`"
                ) from None
            raise
        err.seek(0)
        return subprocess.CompletedProcess(cmd, code, "", err.read())


def release(token: str, salloc_said: str) -> list[str]:
    """Cancel the jobs an interrupted allocation may have left: the ids salloc printed and this user's jobs
    whose comment is `token`. Returns the ids cancelled."""
    ids = set(_JOB_ID.findall(salloc_said))
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        listed = subprocess.run(
            ["squeue", "-h", "--me", "-o", "%i|%k"],
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )
        ids |= {
            job
            for job, _, comment in (ln.partition("|") for ln in listed.stdout.splitlines())
            if comment.strip() == token and job.strip().isdigit()
        }
    for job in sorted(ids):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(["scancel", job], capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
    return sorted(ids)


def srun_command(
    job_id: str,
    count: int,
    task: Sequence[str],
    *,
    image: str | None = None,
    runtime: str = "apptainer",
    job_name: str = JOB_NAME,
) -> list[str]:
    """Exactly one task on each of the job's `count` nodes, all fed the same standard input. /tmp as the
    working directory (a login node's folder need not exist on the nodes); no MPI plugin; one failing
    task does not end the others."""
    cmd = [
        "srun",
        f"--jobid={job_id}",
        f"--nodes={count}",
        f"--ntasks={count}",
        "--ntasks-per-node=1",
        "--input=all",
        "--chdir=/tmp",
        "--mpi=none",
        "--kill-on-bad-exit=0",
        f"--job-name={job_name}",
    ]
    if image is not None and runtime == "pyxis":
        cmd.append("--container-image=" + pyxis_image(image))
    return [*cmd, *task]


def parse_job_id(salloc_stderr: str) -> str | None:
    """'salloc: Granted job allocation 42' (or 'Pending job allocation 42') -> '42'."""
    m = _JOB_ID.search(salloc_stderr)
    return m.group(1) if m else None


def task_line(line: str) -> tuple[str, int, int, str, str] | None:
    """One line of the node task's protocol (envpin.fleet.nodetask.frame): (node, index, lines in all, digest,
    chunk); None for a line that is not the task's (a TaskProlog's, a shell's)."""
    from envpin.fleet.nodetask import MARK, VERSION

    if not line.startswith(MARK + " "):
        return None
    cols = line.rstrip("\r\n").split(" ")
    if len(cols) not in (7, 8) or cols[1] != VERSION or not cols[3].isdigit() or not cols[4].isdigit():
        return None
    return cols[2], int(cols[3]), int(cols[4]), cols[5], cols[6] if len(cols) > 6 else ""


class Arrivals:
    """The nodes whose result lines have all come in, counted while srun still runs (for progress; what the
    lines hold is read at the end by parse_task_output)."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str], set[int]] = {}
        self.whole: set[str] = set()

    def add(self, line: str) -> bool:
        """Take one line of srun's output: True when it completes a node's result not counted before."""
        read = task_line(line)
        if read is None:
            return False
        node, seq, total, digest, _chunk = read
        seen = self._seen.setdefault((node, digest), set())
        seen.add(seq)
        if node in self.whole or seen != set(range(total)):
            return False
        self.whole.add(node)
        return True


def parse_task_output(text: str) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """srun's standard output -> (node -> the task's result, node -> why its lines could not be read).
    Lines that are not the task's (a TaskProlog's, a shell's) are skipped."""
    pieces: dict[str, dict[str, dict[int, str]]] = {}
    totals: dict[tuple[str, str], int] = {}
    for line in text.splitlines():
        read = task_line(line)
        if read is None:
            continue
        node, seq, total, digest, chunk = read
        pieces.setdefault(node, {}).setdefault(digest, {})[seq] = chunk
        totals[(node, digest)] = total
    results: dict[str, dict[str, Any]] = {}
    broken: dict[str, str] = {}
    for node, by_digest in pieces.items():
        for digest, chunks in by_digest.items():
            total = totals[(node, digest)]
            if sorted(chunks) != list(range(total)):
                broken[node] = f"the node's result arrived incomplete ({len(chunks)} of {total} lines)"
                continue
            blob = "".join(chunks[i] for i in range(total))
            if hashlib.sha256(blob.encode("ascii", "replace")).hexdigest()[:16] != digest:
                broken[node] = "the node's result arrived damaged (checksum mismatch)"
                continue
            try:
                result = parse_json(zlib.decompress(base64.b64decode(blob)).decode("utf-8"), "the result", SlurmError)
            except (ValueError, zlib.error) as exc:
                broken[node] = f"the node's result cannot be decoded: {exc}"
                continue
            except SlurmError as exc:
                broken[node] = f"the node's result cannot be decoded: {exc.message}"
                continue
            if isinstance(result, dict):
                results[node] = result
                broken.pop(node, None)
    return results, broken


def node_errors(srun_stderr: str, nodes: Sequence[str]) -> dict[str, list[str]]:
    """srun's and slurmstepd's error lines by the node they name ('srun: error: n2: task 1: Exited with exit
    code 127') and the task's own ('@envpin-task-error n2: ...'); srun's other errors ('Application launch
    failed: ...', which ends every node's task) are added to every node, after its own."""
    own: dict[str, list[str]] = {n: [] for n in nodes}
    general: list[str] = []
    for raw in srun_stderr.splitlines():
        line = raw.strip()
        launch = _SRUN_LAUNCH.match(line)
        m = _SRUN_NODE_LINE.match(line)
        task = _TASK_ERROR.match(line)
        if task and task.group(1) in own:
            own[task.group(1)].append(task.group(2).strip())
        elif launch and launch.group(1) in own:
            own[launch.group(1)].append("task launch failed: " + launch.group(2).strip())
        elif m and (m.group(1) or m.group(3)) in own:
            node, text = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
            own[node].append(text.strip())
        elif line.startswith("srun: error: "):
            general.append("srun: " + line[len("srun: error: ") :])
    return {n: lines + general for n, lines in own.items() if lines or general}


def outcome(
    node: str, result: dict[str, Any] | None, broken: str | None, errors: Sequence[str], timed_out: bool, timeout: int
) -> NodeOutcome:
    """One node's outcome from what came back; no result is never silently ok."""
    if result is None:
        said = "; ".join(errors[:4])
        if broken:
            return NodeOutcome(node, FAILED, error=broken + (f" ({said})" if said else ""))
        if timed_out:
            return NodeOutcome(
                node, TIMED_OUT, error=f"no result within {timeout + GRACE_S} s" + (f" ({said})" if said else "")
            )
        return NodeOutcome(node, FAILED, error="no result from the node" + (f": {said}" if said else ""))
    status = result.get("status")
    if status == OK:
        from envpin.reports.diff import check_report

        text = result.get("report")
        try:
            data = parse_json(text, "the probe's output", ReportError) if isinstance(text, str) else None
            check_report(data, f"the report of {node}")
        except ReportError as exc:
            return NodeOutcome(node, FAILED, error=exc.message)
        return NodeOutcome(node, OK, data=data)
    if status == _TASK_TIMEOUT:
        return NodeOutcome(node, TIMED_OUT, error=str(result.get("error") or "the probe timed out"))
    return NodeOutcome(node, FAILED, error=str(result.get("error") or f"unknown task status {status!r}"))


def safe_file_name(node: str) -> str:
    """A node name as a file name (Slurm's names are host names; anything else is escaped)."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", node)
    return "_" + name if name.startswith(".") or not name else name


# --------------------------------------------------------------------------- the run (real Slurm)


def require_clients() -> None:
    missing = [c for c in CLIENTS if shutil.which(c) is None]
    if missing:
        raise UsageError(
            f"Slurm's client commands are not on PATH (missing: {', '.join(missing)})",
            hint="run this on a login node of the cluster (module load slurm?), or install "
            "slurm-client and point SLURM_CONF at the cluster's slurm.conf",
        )


def _run(cmd: list[str], what: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise SlurmError(
            f"{what} did not answer within {timeout:.0f} s", hint="is slurmctld up? try `scontrol ping`"
        ) from None
    except OSError as exc:
        raise SlurmError(f"cannot run {cmd[0]}: {exc.strerror or exc}") from None
    return proc


def _said(text: str) -> str:
    """What a client command said that matters: its first error line, else its first line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error" in ln.lower()]
    return (errors or lines or ["no message"])[0]


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "no message"


def _partition_plan(partition: str | None, nodes: int | None) -> Plan:
    cmd = ["sinfo", "-h", "-N", "-o", SINFO_FORMAT] + ([f"--partition={partition}"] if partition else [])
    proc = _run(cmd, "sinfo")
    if proc.returncode != 0:
        raise SlurmError(
            f"sinfo failed: {_last_line(proc.stderr)}", hint="is SLURM_CONF right and slurmctld up? try `scontrol ping`"
        )
    return plan(proc.stdout, partition, nodes)


def _allocated(
    p: Plan,
    timeout: int,
    slurm_args: Sequence[str],
    job_name: str,
    say: Callable[[str], None],
    body: Callable[[str], list[NodeOutcome]],
) -> tuple[str | None, list[NodeOutcome]]:
    """Allocate the plan's nodes, run `body(job id)` in the allocation, release it whatever happens."""
    say(
        f"allocating {p.count} node(s) in partition {p.partition}"
        + (f" ({len(p.left_out)} left out: not usable)" if p.left_out else "")
    )
    token = f"envpin-{secrets.token_hex(8)}"
    alloc = None
    job_id = None
    try:
        alloc = allocate(salloc_command(p, timeout, slurm_args, token, job_name), timeout + 60, token)
        job_id = parse_job_id(alloc.stderr)
        if job_id is None:
            raise SlurmError(
                f"salloc refused the request: {_said(alloc.stderr)}",
                hint=f"check the partition and the {param('slurm_args')} options (salloc --help)",
            )
        if alloc.returncode != 0:
            raise SlurmError(
                f"salloc could not allocate {p.count} node(s) in partition {p.partition} "
                f"within {timeout} s: {_said(alloc.stderr)}",
                hint=f"the nodes may be busy: retry later, or with a longer {param('timeout')}",
            )
        return job_id, body(job_id)
    finally:
        if job_id is not None:
            _run(["scancel", job_id], "scancel")
        elif alloc is not None:  # salloc gave no id: make sure no job of this run is left either way
            release(token, alloc.stderr)


def _steps(progress: ProgressCallback | None) -> Callable[[str], None]:
    """What the Slurm steps say (allocating, launching) as progress events, or to nobody."""

    def say(text: str) -> None:
        if progress is not None:
            progress(ProgressEvent("slurm", text))

    return say


def probe(
    out: Path,
    *,
    nodes: int | None = None,
    partition: str | None = None,
    image: str | None = None,
    runtime: str = "apptainer",
    timeout: int = DEFAULT_TIMEOUT_S,
    slurm_args: Sequence[str] = (),
    progress: ProgressCallback | None = None,
    probe_args: Sequence[str] = (),
) -> tuple[str | None, str, list[NodeOutcome]]:
    """Probe the nodes; write out/<node>.json for each ok node and out/<node>.error.txt for each other one.
    Returns (job id, partition, one outcome per node, sorted by node)."""
    from envpin.environment.payload import payload
    from envpin.files.write import check_output_folder

    say = _steps(progress)
    if runtime not in RUNTIMES:
        raise UsageError(f"{param('runtime')} must be one of {', '.join(RUNTIMES)}", hint="apptainer is the default")
    if timeout < 1:
        raise UsageError(f"{param('timeout')} must be at least 1 second", hint=f"the default is {DEFAULT_TIMEOUT_S}")
    check_output_folder(out, "out")
    require_clients()
    archive = payload()
    sha = hashlib.sha256(archive).hexdigest()
    task = task_command(sha, timeout, image=image, runtime=runtime, probe_args=probe_args)
    p = _partition_plan(partition, nodes)
    outcomes = [NodeOutcome(n.name, FAILED, error=n.why_not) for n in p.left_out]
    job_id = None
    if p.count:

        def body(job: str) -> list[NodeOutcome]:
            allocated, launched = _launch(job, p, task, archive, timeout, say, JOB_NAME, image, runtime, nodes=progress)
            return [launched.outcome(n, timeout) for n in allocated]

        job_id, got = _allocated(p, timeout, slurm_args, JOB_NAME, say, body)
        outcomes += got
    outcomes.sort(key=lambda o: o.node)
    write_outcomes(out, outcomes)
    return job_id, p.partition, [_with_path(out, o) for o in outcomes]


def selftest(
    out: Path,
    *,
    nodes: int = SELFTEST_NODES,
    partition: str | None = None,
    python: str = "python3",
    runs: int = 2,
    steps: int | None = None,
    port_base: int | None = None,
    timeout: int = SELFTEST_TIMEOUT_S,
    slurm_args: Sequence[str] = (),
    progress: ProgressCallback | None = None,
) -> tuple[str | None, str, list[NodeOutcome], MultiWorker]:
    """The multi-worker self-test across `nodes` nodes: one srun step, one task per node, which probes its
    node and then runs one MultiWorkerMirroredStrategy worker `runs` times (envpin.fleet.nodetask --workers;
    the workers find each other through SlurmClusterResolver). Writes out/<node>.json (the node's probe
    report) or out/<node>.error.txt, and out/_fleet-selftest.json (envpin.fleet.multiworker: the workers and
    the verdict across them). Returns (job id, partition, one probe outcome per node, the verdict)."""
    from envpin.environment.payload import payload
    from envpin.files.write import check_output_folder
    from envpin.fleet import multiworker

    say = _steps(progress)
    if nodes < 2:
        raise UsageError(
            f"{param('nodes')} must be at least 2 for a multi-worker self-test, not {nodes}",
            hint=f"one node's own determinism is the probe's self-test: {param('slurm', command='fleet probe')}",
        )
    if not 1 <= runs <= multiworker.MAX_RUNS:
        raise UsageError(
            f"{param('runs')} must be from 1 to {multiworker.MAX_RUNS}, not {runs}",
            hint="two runs (the default) show whether each worker repeats itself",
        )
    if steps is not None and steps < 1:
        raise UsageError(f"{param('steps')} must be at least 1, not {steps}", hint="leave it out for the default")
    if port_base is not None and not 1024 <= port_base <= 65535 - runs:
        raise UsageError(
            f"{param('port_base')} must be from 1024 to {65535 - runs}, not {port_base}",
            hint="run k of the workers listens on the port base + k on every node",
        )
    if timeout < 1:
        raise UsageError(f"{param('timeout')} must be at least 1 second", hint=f"the default is {SELFTEST_TIMEOUT_S}")
    check_output_folder(out, "out")
    require_clients()
    archive = payload()
    sha = hashlib.sha256(archive).hexdigest()
    p = _partition_plan(partition, nodes)
    found: list[multiworker.NodeRuns] = []

    def body(job: str) -> list[NodeOutcome]:
        base = multiworker.port_base_for(job) if port_base is None else port_base
        args = worker_task_args(runs, base, steps)
        task = task_command(sha, timeout, probe_args=args, python=python)
        what = f"one probe and {runs} multi-worker run(s) (ports {base}..{base + runs - 1})"
        allocated, launched = _launch(job, p, task, archive, timeout, say, SELFTEST_JOB_NAME, what=what, nodes=progress)
        got = []
        for n in allocated:
            result = launched.results.get(n)
            o = launched.outcome(n, timeout, _probe_part(result))
            got.append(o)
            failure = None if result is not None else (o.status, o.error or "no result from the node")
            found.append(multiworker.node_runs(n, result, failure, runs))
        return got

    job_id, outcomes = _allocated(p, timeout, slurm_args, SELFTEST_JOB_NAME, say, body)
    outcomes.sort(key=lambda o: o.node)
    verdict = multiworker.judge(found, runs, launcher="slurm", job=job_id, steps=steps)
    verdict = verdict.replace(source=str(out / multiworker.RESULT_NAME))
    text = multiworker.document_text(verdict).encode("utf-8")
    write_outcomes(out, outcomes, {out / multiworker.RESULT_NAME: text})
    return job_id, p.partition, [_with_path(out, o) for o in outcomes], verdict


def _probe_part(result: dict[str, Any] | None) -> dict[str, Any] | None:
    """The probe's part of a --workers task result, as a probe task's result (what `outcome` reads)."""
    if result is None:
        return None
    report = result.get("report")
    if isinstance(report, str) and report.strip():
        return {"status": OK, "report": report}
    if "exit_code" in result:
        said = _last_line(str(result.get("stderr") or "")) if result.get("stderr") else "no output on stderr"
        return {"status": FAILED, "error": f"the probe exited with status {result['exit_code']}: {said}"}
    return result


@dataclass(frozen=True, slots=True)
class Launched(Value):
    """What one srun step brought back: each node's task result, or why its lines could not be read, srun's
    and slurmstepd's errors per node, and whether envpin had to stop srun."""

    results: dict[str, dict[str, Any]]
    broken: dict[str, str]
    errors: dict[str, list[str]]
    timed_out: bool

    def outcome(self, node: str, timeout: int, result: dict[str, Any] | None = None) -> NodeOutcome:
        """The node's probe outcome (`result`: the task's result as the probe's, when the caller reshaped it)."""
        got = self.results.get(node) if result is None else result
        return outcome(node, got, self.broken.get(node), self.errors.get(node, []), self.timed_out, timeout)


def _launch(
    job_id: str,
    p: Plan,
    task: list[str],
    archive: bytes,
    timeout: int,
    say: Callable[[str], None],
    job_name: str,
    image: str | None = None,
    runtime: str = "apptainer",
    what: str = "one probe task",
    nodes: ProgressCallback | None = None,
) -> tuple[list[str], Launched]:
    """One srun step of `task` on every node of the job, the archive on its standard input: (the job's
    nodes, what came back). `nodes` hears how many nodes' results have come in whole, as they come."""
    allocated, nodelist = job_nodes(job_id, p.count)
    say(f"job {job_id}: {what} on each of {nodelist} (limit {timeout} s per node)")
    cmd = srun_command(job_id, p.count, task, image=image, runtime=runtime, job_name=job_name)
    arrivals, expected = Arrivals(), set(allocated)

    def counted() -> None:
        if nodes is not None:  # a name the job does not list is not one of its nodes (parse_task_output says more)
            done = len(arrivals.whole & expected)
            nodes(ProgressEvent("nodes", completed=done, total=len(expected), unit="nodes"))

    def arrived(line: bytes) -> None:
        if arrivals.add(line.decode("utf-8", "replace")):
            counted()

    counted()
    srun = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        stdout, stderr, timed_out = communicate(srun, archive, timeout + GRACE_S, arrived)
    finally:
        if srun.poll() is None:  # interrupted: leave no srun behind
            srun.kill()
            with contextlib.suppress(Exception):
                srun.wait(timeout=5)  # communicate's threads read what is left of its pipes
    results, broken = parse_task_output(stdout.decode("utf-8", "replace"))
    errors = node_errors(stderr.decode("utf-8", "replace"), allocated)
    return allocated, Launched(results, broken, errors, timed_out)


def communicate(
    proc: subprocess.Popen[bytes], data: bytes, timeout: float, on_line: Callable[[bytes], None]
) -> tuple[bytes, bytes, bool]:
    """proc.communicate(data) within `timeout` seconds, handing each line of stdout to `on_line` as it comes:
    (stdout, stderr, whether it ran out of time). One that does is terminated, and killed after 15 s more.
    An error of `on_line` never stops the reading (proc would block on a full pipe): it is raised at the end."""
    import threading

    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    stdin, stdout, stderr = proc.stdin, proc.stdout, proc.stderr
    out: list[bytes] = []
    err: list[bytes] = []
    failed: list[BaseException] = []

    def feed() -> None:
        try:
            stdin.write(data)
        except (BrokenPipeError, ValueError):  # proc exited without reading all of it
            pass
        finally:
            with contextlib.suppress(OSError, ValueError):
                stdin.close()

    def read_out() -> None:
        for line in iter(stdout.readline, b""):
            out.append(line)
            try:
                on_line(line)
            except Exception as exc:
                if not failed:
                    failed.append(exc)

    def read_err() -> None:
        err.append(stderr.read())

    threads = [threading.Thread(target=f, daemon=True) for f in (feed, read_out, read_err)]
    for t in threads:
        t.start()
    timed_out = False
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for t in threads:
        t.join()
    for stream in (stdout, stderr):
        stream.close()
    if failed:
        raise failed[0]
    return b"".join(out), b"".join(err), timed_out


def job_nodes(job_id: str, count: int) -> tuple[list[str], str]:
    """The job's nodes, one name each, and Slurm's host list of them."""
    nodelist = _run(["squeue", "-h", "-j", job_id, "-o", "%N"], "squeue").stdout.strip()
    expanded = _run(["scontrol", "show", "hostnames", nodelist], "scontrol")
    allocated = expanded.stdout.split()
    if expanded.returncode != 0 or len(allocated) != count:
        raise SlurmError(
            f"cannot read the nodes of job {job_id} (squeue said {nodelist!r})",
            hint="see `scontrol show job " + job_id + "`",
        )
    return allocated, nodelist


def _with_path(out: Path, o: NodeOutcome) -> NodeOutcome:
    suffix = ".json" if o.status == OK else ERROR_SUFFIX
    return NodeOutcome(o.node, o.status, out / (safe_file_name(o.node) + suffix), o.error, o.data)


def write_outcomes(out: Path, outcomes: Sequence[NodeOutcome], extra: Mapping[Path, bytes] | None = None) -> None:
    """Each node's report or its error (and the `extra` files), all at once; a node's file from an earlier run
    of the other kind is removed, so the folder never shows a stale report for a node that failed this time."""
    from envpin.files.write import atomic_write_many
    from envpin.probe.report import to_json

    files: dict[Path, bytes] = dict(extra or {})
    stale: list[Path] = []
    for o in outcomes:
        base = out / safe_file_name(o.node)
        if o.status == OK and o.data is not None:
            files[base.with_name(base.name + ".json")] = to_json(o.data).encode("utf-8")
            stale.append(base.with_name(base.name + ERROR_SUFFIX))
        else:
            text = error_file_text(o.status, o.error or "no report")
            files[base.with_name(base.name + ERROR_SUFFIX)] = text.encode("utf-8", "backslashreplace")
            stale.append(base.with_name(base.name + ".json"))
    atomic_write_many(files)
    for path in stale:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


# --------------------------------------------------------------------------- what the reports say together


def fleet_result(outcomes: Sequence[NodeOutcome], multiworker: Sequence[MultiWorker] = ()) -> FleetResult:
    """The fleet comparison of the nodes (envpin.fleet.aggregate, as `fleet report` makes it), with the
    multi-worker self-test's verdict when there is one: a node that failed or timed out stays in it as such."""
    from envpin.fleet import aggregate

    entries: list[tuple[str, Any]] = []
    for o in outcomes:
        if o.status == OK and o.data is not None:
            entries.append((o.node, o.data))
        else:
            entries.append((o.node, aggregate.NodeFailure(o.status, o.error or "no report")))
    return aggregate.aggregate(
        entries, sources=[str(o.report) if o.report else None for o in outcomes], multiworker=multiworker
    )
