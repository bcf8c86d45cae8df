"""The node side of `envpin study/cost --slurm`: one run of the user's command on a Slurm node, with the hook.

srun runs it as ``python3 -c <this file's source> SHA256 NAME=VALUE... -- COMMAND...`` with the hook bundle on
standard input (a zip of ``sitecustomize.py`` and ``envpin.pyz``), so nothing has to be installed on a node and
no storage has to be shared. It unpacks the bundle into a temporary folder of the task, puts that folder first
on PYTHONPATH, sets the run's variables (ENVPIN_SEED, ENVPIN_RUNS_RECIPE, PYTHONHASHSEED, ...: they travel as
arguments, so they arrive whatever srun's --export says) and runs the command; the command's standard output
and error pass through srun unchanged (so the metrics line comes back). Then the hook's records (its Keras
History, step times, seed, errors) follow on standard output as
``@envpin-run-record 1 SEQ TOTAL DIGEST CHUNK`` lines (base64 of the zlib-compressed JSON, cut into lines of
600 characters, which srun delivers whole), and it exits with the command's status.

Standard library only, Python 3.6+ (a node's python3 may be old); it is a program, not a part of envpin's host
side: the host reads the lines back in envpin/runs/launch.py.
"""

import base64
import glob
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
import zlib

TYPE_CHECKING = False  # typing's without importing it; annotations naming its types are quoted (3.6 evaluates them)
if TYPE_CHECKING:
    from typing import Any, Dict, List

MARK = "@envpin-run-record"
VERSION = "1"
CHUNK = 600
#: Exit status when the bundle is damaged or the arguments are wrong (the command did not run).
BROKEN = 3
#: The most read from standard input (the bundle: a few hundred kilobytes) and from one hook record (its
#: Keras History grows with the user's training): anything larger is refused or skipped, never read whole.
MAX_BUNDLE = 64 << 20
MAX_RECORD = 64 << 20


def frame(record: "Dict[str, Any]") -> "List[str]":
    """One hook record as protocol lines (see the module docstring)."""
    blob = base64.b64encode(zlib.compress(json.dumps(record, sort_keys=True).encode("utf-8"))).decode("ascii")
    digest = hashlib.sha256(blob.encode("ascii")).hexdigest()[:16]
    chunks = [blob[i : i + CHUNK] for i in range(0, len(blob), CHUNK)] or [""]
    return ["%s %s %d %d %s %s" % (MARK, VERSION, i, len(chunks), digest, c) for i, c in enumerate(chunks)]


def _fail(message: str) -> int:
    sys.stderr.write("envpin-run: %s\n" % message)
    return BROKEN


def main(argv: "List[str]") -> int:
    if "--" not in argv or argv.index("--") < 1:
        return _fail("usage: nodeboot SHA256 [NAME=VALUE...] -- COMMAND...")
    at = argv.index("--")
    expected, assignments, command = argv[0], argv[1:at], argv[at + 1 :]
    if not command:
        return _fail("no command after --")
    bundle = sys.stdin.buffer.read(MAX_BUNDLE + 1)
    if len(bundle) > MAX_BUNDLE:
        return _fail("the hook bundle is larger than %d bytes" % MAX_BUNDLE)
    if hashlib.sha256(bundle).hexdigest() != expected:
        return _fail("the hook bundle arrived damaged (%d bytes, sha256 mismatch)" % len(bundle))
    tmp = tempfile.mkdtemp(prefix="envpin-run-")
    try:
        hook, out = os.path.join(tmp, "hook"), os.path.join(tmp, "out")
        os.mkdir(out)
        with zipfile.ZipFile(io.BytesIO(bundle)) as archive:
            archive.extractall(hook)
        env = dict(os.environ)
        for name in [k for k in env if k.startswith("ENVPIN_RUNS_")] + ["ENVPIN_SEED"]:
            env.pop(name, None)
        for item in assignments:
            name, _, value = item.partition("=")
            env[name] = value
        paths = [hook, os.path.join(hook, "envpin.pyz")] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
        env["PYTHONPATH"] = os.pathsep.join(paths)
        env["ENVPIN_RUNS_OUT"] = out
        sys.stdout.flush()
        try:
            code = subprocess.call(command, env=env, stdin=subprocess.DEVNULL)
        except OSError as exc:
            return _fail("cannot run %s on %s: %s" % (command[0], os.uname()[1], exc.strerror or exc))
        lines = []
        for path in sorted(glob.glob(os.path.join(out, "hook-*.json"))):
            try:
                with open(path, "rb") as fh:
                    data = fh.read(MAX_RECORD + 1)
                if len(data) > MAX_RECORD:
                    sys.stderr.write("envpin-run: %s is larger than %d bytes: left out\n" % (path, MAX_RECORD))
                    continue
                lines += frame(json.loads(data.decode("utf-8")))
            except (OSError, ValueError):
                continue
        if lines:  # after a newline: the command's last line may not have ended with one
            sys.stdout.write("\n" + "\n".join(lines) + "\n")
            sys.stdout.flush()
        return code if code >= 0 else 128 - code
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
