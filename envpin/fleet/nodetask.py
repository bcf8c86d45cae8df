"""The task a fleet probe runs on every node: unpack the probe archive, run it, send its report back.

It runs as ``python3 -c <this file's source> SHA256 TIMEOUT [probe options]`` with envpin.pyz on standard
input (srun broadcasts its standard input to every task), so nothing has to be installed on a node and
no storage has to be shared: the report travels back through the launcher's standard output, the one
channel every launcher has. It is standard-library Python 3.6 (the oldest NGC images), because with
``--image`` it runs with the image's interpreter; it lives outside envpin/probe because it is what carries
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
    from typing import Dict, List, Sequence, Union

    Result = Dict[str, Union[str, int]]

MARK = "@envpin-task"
VERSION = "1"
CHUNK = 600
STDERR_TAIL = 2000


def node_name() -> str:
    """Slurm's name for this node (what the allocation lists), else the host name."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname()


def frame(node: str, result: "Result") -> "List[str]":
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


def main(argv: "List[str]") -> int:
    if len(argv) < 2:
        sys.stderr.write("usage: python3 -c SOURCE SHA256 TIMEOUT [probe options] < envpin.pyz\n")
        return 2
    expected, timeout, args = argv[0], float(argv[1]), argv[2:]
    payload = sys.stdin.buffer.read()
    result = run_probe(payload, expected, timeout, args)
    result["python"] = sys.executable
    node = node_name()
    sys.stdout.write("\n".join(frame(node, result)) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
