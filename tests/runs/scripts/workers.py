"""Start a MultiWorkerMirroredStrategy command as N worker processes on this machine, the way a user does
without a cluster manager: free ports on 127.0.0.1, one TF_CONFIG per worker, wait for them all.

    python workers.py [--workers N] [--chief] [--ignore-status] -- COMMAND...

With --chief the first of the N tasks is TF_CONFIG's `chief` and the others are workers 0 to N-2. It exits
with the first non-zero status of the workers, or, with --ignore-status, 0 whatever they did (as a shell
launcher `cmd & cmd & wait` does): the run of a failed worker must then be seen through the workers' own
records."""

import json
import os
import socket
import subprocess
import sys


def free_ports(n):
    """N ports free on 127.0.0.1 now (all bound at once, so they differ)."""
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def main(argv):
    at = argv.index("--")
    options, command = argv[:at], argv[at + 1 :]
    workers = int(options[options.index("--workers") + 1]) if "--workers" in options else 2
    hosts = [f"127.0.0.1:{port}" for port in free_ports(workers)]
    if "--chief" in options:
        cluster = {"chief": hosts[:1], "worker": hosts[1:]}
        tasks = [("chief", 0)] + [("worker", i) for i in range(workers - 1)]
    else:
        cluster, tasks = {"worker": hosts}, [("worker", i) for i in range(workers)]
    procs = []
    for kind, index in tasks:
        config = {"cluster": cluster, "task": {"type": kind, "index": index}}
        procs.append(subprocess.Popen(command, env=dict(os.environ, TF_CONFIG=json.dumps(config))))
    codes = [p.wait() for p in procs]
    if "--ignore-status" in options:
        return 0
    return next((c for c in codes if c != 0), 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
