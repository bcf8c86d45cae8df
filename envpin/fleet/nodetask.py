"""The task a fleet probe runs on every node: unpack the probe archive, run it, send its report back.

It runs as ``python3 -c <this file's source> SHA256 TIMEOUT [probe options]`` with envpin.pyz on standard
input (srun broadcasts its standard input to every task), so nothing has to be installed on a node and
no storage has to be shared: the report travels back through the launcher's standard output, the one
channel every launcher has.

``python3 -c <source> SHA256 TIMEOUT --workers RUNS PORT_BASE [worker options]`` is the multi-worker
self-test's task (``envpin fleet selftest --slurm``): the probe once (``--no-selftest``: the node's report),
then RUNS runs, one after another, of one MultiWorkerMirroredStrategy worker
(``python -m envpin.probe.replicas --worker [worker options] --port-base PORT_BASE+k --trace FILE`` for run
k, the archive on its path, in the environment envpin.probe.tfchild gives TensorFlow children); every node's
task does the same, so run k's workers meet on every node at once. Each run's standard output (the worker's
JSON) travels back as it is, with its exit status, stderr's tail and its trace file (the collectives' raw
bytes, compressed); TIMEOUT bounds the probe and all the runs together.

It is standard-library Python 3.6 (the oldest NGC images), because with ``--image`` it runs with the image's
interpreter; it lives outside envpin/probe because it is what carries
envpin.pyz, not a part of it.

Output: the task's result as one JSON document, compressed and base64-encoded, cut into lines of
``@envpin-task 1 NODE SEQ TOTAL DIGEST CHUNK``. Every line names its node and the digest of the whole
message, so the host reassembles each node's message even when the launcher interleaves the lines of
several nodes, and notices a damaged one. Lines stay short (about 650 bytes), which srun delivers whole
(docs/slurm.md).
The task exits 0 whenever it printed its result; the result says whether the probe worked.
"""

import base64
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import zlib

TYPE_CHECKING = False  # typing's without importing it; annotations naming its types are quoted (3.6 evaluates them)
if TYPE_CHECKING:
    from typing import Dict, List, Mapping, Sequence, Union

    Result = Dict[str, Union[str, int]]

MARK = "@envpin-task"
VERSION = "1"
CHUNK = 600
STDERR_TAIL = 2000
#: The option that makes the task the multi-worker self-test's (see the module docstring).
WORKERS = "--workers"
WORKER_MODULE = "envpin.probe.replicas"
#: The largest trace file a worker run sends back (the self-test's traces are a few hundred kB).
TRACE_LIMIT = 8 * 1024 * 1024


def node_name() -> str:
    """Slurm's name for this node (what the allocation lists), else the host name."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname()


def frame(node: str, result: "Mapping[str, object]") -> "List[str]":
    """The result as protocol lines (see the module docstring)."""
    blob = base64.b64encode(zlib.compress(json.dumps(result, sort_keys=True).encode("utf-8"))).decode("ascii")
    digest = hashlib.sha256(blob.encode("ascii")).hexdigest()[:16]
    chunks = [blob[i : i + CHUNK] for i in range(0, len(blob), CHUNK)] or [""]
    return ["%s %s %s %d %d %s %s" % (MARK, VERSION, node, i, len(chunks), digest, c) for i, c in enumerate(chunks)]


def run_probe(payload: bytes, expected: str, timeout: float, args: "Sequence[str]") -> "Result":
    """Run the probe archive `payload`; a result dict with status ok / failed / timeout."""
    if hashlib.sha256(payload).hexdigest() != expected:
        return {
            "status": "failed",
            "error": "the probe archive arrived damaged (%d bytes, sha256 mismatch)" % len(payload),
        }
    tmp = tempfile.mkdtemp(prefix="envpin-task-")
    try:
        archive = os.path.join(tmp, "envpin.pyz")
        with open(archive, "wb") as fh:
            fh.write(payload)
        try:
            proc = subprocess.run(
                [sys.executable, archive, *args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            return {"status": "timeout", "error": "the probe did not finish within %g s" % timeout}
        stderr = proc.stderr.decode("utf-8", "replace")[-STDERR_TAIL:]
        report = proc.stdout.decode("utf-8", "replace")
        if proc.returncode == 1 and report.strip():
            # The probe wrote its report and its self-test failed: the report says how, the node is probed.
            return {"status": "ok", "exit_code": 1, "stderr": stderr, "report": report}
        if proc.returncode != 0:
            last = stderr.strip().splitlines()[-1:] or ["no output on stderr"]
            return {
                "status": "failed",
                "exit_code": proc.returncode,
                "stderr": stderr,
                "error": "the probe exited with status %d: %s" % (proc.returncode, last[0]),
            }
        return {"status": "ok", "exit_code": 0, "stderr": stderr, "report": report}
    except OSError as exc:
        return {"status": "failed", "error": "cannot run the probe: %s" % exc}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _worker_env(archive: str) -> "Dict[str, str]":
    """The workers' environment: what envpin's own TensorFlow children get (envpin.probe.tfchild.child_env,
    read from the archive: determinism on, TensorFlow's C++ chatter off), with the archive on the path."""
    sys.path.insert(0, archive)
    try:
        from envpin.probe import tfchild
    finally:
        sys.path.remove(archive)
    return tfchild.child_env(None, determinism=True)


def _packed(path: str) -> str:
    """A trace file, compressed and base64-encoded ('' when there is none or it is larger than TRACE_LIMIT)."""
    try:
        if os.path.getsize(path) > TRACE_LIMIT:
            return ""
        with open(path, "rb") as fh:
            return base64.b64encode(zlib.compress(fh.read(), 6)).decode("ascii")
    except OSError:
        return ""


def run_workers(
    payload: bytes, expected: str, timeout: float, runs: int, port_base: int, args: "Sequence[str]"
) -> "Dict[str, object]":
    """The probe once, then `runs` runs of the worker (see the module docstring), all within `timeout`."""
    import time

    if hashlib.sha256(payload).hexdigest() != expected:
        return {
            "status": "failed",
            "error": "the probe archive arrived damaged (%d bytes, sha256 mismatch)" % len(payload),
        }
    deadline = time.monotonic() + timeout
    tmp = tempfile.mkdtemp(prefix="envpin-task-")
    workers = []  # type: List[Dict[str, object]]
    result = {"status": "ok", "workers": workers}  # type: Dict[str, object]
    try:
        archive = os.path.join(tmp, "envpin.pyz")
        with open(archive, "wb") as fh:
            fh.write(payload)
        env = _worker_env(archive)
        commands = [([sys.executable, archive, "--no-selftest"], "")]
        for k in range(runs):
            trace = os.path.join(tmp, "trace-%d.bin" % k)
            cmd = [sys.executable, "-m", WORKER_MODULE, "--worker", *args]
            commands.append(([*cmd, "--port-base", str(port_base + k), "--trace", trace], trace))
        for i, (cmd, trace) in enumerate(commands):
            left = deadline - time.monotonic()
            what = "the probe" if i == 0 else "worker run %d of %d" % (i, runs)
            if left <= 0:
                result.update(status="timeout", error="%s did not start within %g s" % (what, timeout))
                break
            try:
                proc = subprocess.run(
                    cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    timeout=left,
                    env=env if i else None,
                )
            except subprocess.TimeoutExpired:
                result.update(status="timeout", error="%s did not finish within %g s" % (what, timeout))
                break
            out = proc.stdout.decode("utf-8", "replace")
            tail = proc.stderr.decode("utf-8", "replace")[-STDERR_TAIL:]
            if i == 0:
                result.update(report=out, exit_code=proc.returncode, stderr=tail)
            else:
                workers.append({"exit_code": proc.returncode, "stdout": out, "stderr": tail, "trace": _packed(trace)})
        return result
    except (OSError, ImportError) as exc:
        return {"status": "failed", "error": "cannot run the self-test: %s" % exc, "workers": workers}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: "List[str]") -> int:
    if len(argv) < 2:
        sys.stderr.write("usage: python3 -c SOURCE SHA256 TIMEOUT [probe options] < envpin.pyz\n")
        return 2
    expected, timeout, args = argv[0], float(argv[1]), argv[2:]
    payload = sys.stdin.buffer.read()
    if args[:1] == [WORKERS]:
        if len(args) < 3 or not args[1].isdigit() or not args[2].isdigit():
            sys.stderr.write("usage: python3 -c SOURCE SHA256 TIMEOUT --workers RUNS PORT_BASE [options]\n")
            return 2
        result = run_workers(payload, expected, timeout, int(args[1]), int(args[2]), args[3:])  # type: Dict[str, object]
    else:
        result = dict(run_probe(payload, expected, timeout, args))
    result["python"] = sys.executable
    node = node_name()
    sys.stdout.write("\n".join(frame(node, result)) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
