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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envpin.errors import ReportError, SlurmError, UsageError, param
from envpin.files.read import parse_json
from envpin.fleet.aggregate import FAILED, OK, TIMED_OUT  # a node's outcome: the fleet report's statuses
from envpin.fleet.inputs import ERROR_SUFFIX, error_file_text  # the error file `fleet report` reads back
from envpin.record import Value

if TYPE_CHECKING:
    from envpin.fleet.aggregate import FleetResult
    from envpin.portable.imageref import ImageRef

CLIENTS = ("sinfo", "salloc", "srun", "squeue", "scontrol", "scancel")
#: Container runtimes for --image: the first two run inside the task, pyxis is an srun plugin.
RUNTIMES = ("apptainer", "singularity", "pyxis")
JOB_NAME = "envpin-fleet-probe"
DEFAULT_TIMEOUT_S = 300
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
) -> list[str]:
    """The command each task runs: the node-side task under python3, inside `image` when given. The probe
    runs the determinism self-test by default where TensorFlow is importable (probe_args: --no-selftest,
    --quick). /bin/sh starts it only after checking that the program is on the node's PATH (_START)."""
    python = ["python3", "-c", task_source(), payload_sha256, str(timeout), *probe_args]
    if image is None or runtime == "pyxis":
        return ["/bin/sh", "-c", _START, "envpin-task", *python]
    # --nv binds the node's NVIDIA driver and devices into the container (a warning on a node without GPUs).
    return ["/bin/sh", "-c", _START, "envpin-task", runtime, "exec", "--nv", apptainer_image(image), *python]


def salloc_command(p: Plan, timeout: int, extra: Sequence[str] = (), token: str | None = None) -> list[str]:
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
        f"--job-name={JOB_NAME}",
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
    job_id: str, count: int, task: Sequence[str], *, image: str | None = None, runtime: str = "apptainer"
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
        f"--job-name={JOB_NAME}",
    ]
    if image is not None and runtime == "pyxis":
        cmd.append("--container-image=" + pyxis_image(image))
    return [*cmd, *task]


def parse_job_id(salloc_stderr: str) -> str | None:
    """'salloc: Granted job allocation 42' (or 'Pending job allocation 42') -> '42'."""
    m = _JOB_ID.search(salloc_stderr)
    return m.group(1) if m else None


def parse_task_output(text: str) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """srun's standard output -> (node -> the task's result, node -> why its lines could not be read).
    Lines that are not the task's (a TaskProlog's, a shell's) are skipped."""
    from envpin.fleet.nodetask import MARK, VERSION

    pieces: dict[str, dict[str, dict[int, str]]] = {}
    totals: dict[tuple[str, str], int] = {}
    for line in text.splitlines():
        if not line.startswith(MARK + " "):
            continue
        cols = line.split(" ")
        if len(cols) not in (7, 8) or cols[1] != VERSION or not cols[3].isdigit() or not cols[4].isdigit():
            continue
        node, seq, total, digest = cols[2], int(cols[3]), int(cols[4]), cols[5]
        pieces.setdefault(node, {}).setdefault(digest, {})[seq] = cols[6] if len(cols) > 6 else ""
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


def probe(
    out: Path,
    *,
    nodes: int | None = None,
    partition: str | None = None,
    image: str | None = None,
    runtime: str = "apptainer",
    timeout: int = DEFAULT_TIMEOUT_S,
    slurm_args: Sequence[str] = (),
    progress: Callable[[str], None] | None = None,
    probe_args: Sequence[str] = (),
) -> tuple[str | None, str, list[NodeOutcome]]:
    """Probe the nodes; write out/<node>.json for each ok node and out/<node>.error.txt for each other one.
    Returns (job id, partition, one outcome per node, sorted by node)."""
    from envpin.environment.payload import payload
    from envpin.files.write import check_output_folder

    say = progress or (lambda _text: None)
    if runtime not in RUNTIMES:
        raise UsageError(f"{param('runtime')} must be one of {', '.join(RUNTIMES)}", hint="apptainer is the default")
    if timeout < 1:
        raise UsageError(f"{param('timeout')} must be at least 1 second", hint=f"the default is {DEFAULT_TIMEOUT_S}")
    check_output_folder(out, "out")
    require_clients()
    archive = payload()
    sha = hashlib.sha256(archive).hexdigest()
    task = task_command(sha, timeout, image=image, runtime=runtime, probe_args=probe_args)

    cmd = ["sinfo", "-h", "-N", "-o", SINFO_FORMAT] + ([f"--partition={partition}"] if partition else [])
    proc = _run(cmd, "sinfo")
    if proc.returncode != 0:
        raise SlurmError(
            f"sinfo failed: {_last_line(proc.stderr)}", hint="is SLURM_CONF right and slurmctld up? try `scontrol ping`"
        )
    p = plan(proc.stdout, partition, nodes)
    outcomes = [NodeOutcome(n.name, FAILED, error=n.why_not) for n in p.left_out]
    job_id = None
    if p.count:
        say(
            f"allocating {p.count} node(s) in partition {p.partition}"
            + (f" ({len(p.left_out)} left out: not usable)" if p.left_out else "")
        )
        token = f"envpin-{secrets.token_hex(8)}"
        alloc = None
        try:
            alloc = allocate(salloc_command(p, timeout, slurm_args, token), timeout + 60, token)
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
            outcomes += _run_tasks(job_id, p, task, archive, timeout, image, runtime, say)
        finally:
            if job_id is not None:
                _run(["scancel", job_id], "scancel")
            elif alloc is not None:  # salloc gave no id: make sure no job of this run is left either way
                release(token, alloc.stderr)
    outcomes.sort(key=lambda o: o.node)
    write_outcomes(out, outcomes)
    return job_id, p.partition, [_with_path(out, o) for o in outcomes]


def _run_tasks(
    job_id: str,
    p: Plan,
    task: list[str],
    archive: bytes,
    timeout: int,
    image: str | None,
    runtime: str,
    say: Callable[[str], None],
) -> list[NodeOutcome]:
    nodelist = _run(["squeue", "-h", "-j", job_id, "-o", "%N"], "squeue").stdout.strip()
    expanded = _run(["scontrol", "show", "hostnames", nodelist], "scontrol")
    allocated = expanded.stdout.split()
    if expanded.returncode != 0 or len(allocated) != p.count:
        raise SlurmError(
            f"cannot read the nodes of job {job_id} (squeue said {nodelist!r})",
            hint="see `scontrol show job " + job_id + "`",
        )
    say(f"job {job_id}: one probe task on each of {nodelist} (limit {timeout} s per node)")
    cmd = srun_command(job_id, p.count, task, image=image, runtime=runtime)
    srun = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    timed_out = False
    try:
        stdout, stderr = srun.communicate(archive, timeout=timeout + GRACE_S)
    except subprocess.TimeoutExpired:
        timed_out = True
        srun.terminate()
        try:
            stdout, stderr = srun.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            srun.kill()
            stdout, stderr = srun.communicate()
    finally:
        if srun.poll() is None:  # interrupted: leave no srun behind
            srun.kill()
            with contextlib.suppress(Exception):
                srun.communicate(timeout=5)
    results, broken = parse_task_output(stdout.decode("utf-8", "replace"))
    errors = node_errors(stderr.decode("utf-8", "replace"), allocated)
    return [outcome(n, results.get(n), broken.get(n), errors.get(n, []), timed_out, timeout) for n in allocated]


def _with_path(out: Path, o: NodeOutcome) -> NodeOutcome:
    suffix = ".json" if o.status == OK else ERROR_SUFFIX
    return NodeOutcome(o.node, o.status, out / (safe_file_name(o.node) + suffix), o.error, o.data)


def write_outcomes(out: Path, outcomes: Sequence[NodeOutcome]) -> None:
    """Each node's report or its error, all at once; a node's file from an earlier run of the other kind is
    removed, so the folder never shows a stale report for a node that failed this time."""
    from envpin.files.write import atomic_write_many
    from envpin.probe.report import to_json

    files: dict[Path, bytes] = {}
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


def fleet_result(outcomes: Sequence[NodeOutcome]) -> FleetResult:
    """The fleet comparison of the nodes (envpin.fleet.aggregate, as `fleet report` makes it): a node that
    failed or timed out stays in it as such."""
    from envpin.fleet import aggregate

    entries: list[tuple[str, Any]] = []
    for o in outcomes:
        if o.status == OK and o.data is not None:
            entries.append((o.node, o.data))
        else:
            entries.append((o.node, aggregate.NodeFailure(o.status, o.error or "no report")))
    return aggregate.aggregate(entries, sources=[str(o.report) if o.report else None for o in outcomes])
