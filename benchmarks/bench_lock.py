"""Benchmark: `envpin lock` on the host path against plain `uv pip compile --generate-hashes`, side by side.

    .venv/bin/python benchmarks/bench_lock.py [--runs 5] [--image REF] [--json]

Needs PyPI (pypi.org:443) and Docker with the stand-in images of scripts/services.sh (the default image is
the Python 3.6 stand-in, whose lock runs on the host with uv). Both commands get the same requirements.in
and the same target: the image's Python version and the manylinux platform envpin derives from the wheel
tags its pip accepts (read once, up front). envpin's run is the real CLI in a fresh process (`envpin lock
... --resolver host`: start-up, the image's facts from a throwaway container, uv, checking the files against
the image's tags, writing the lock); uv's is `uv pip compile requirements.in --python-version X
--python-platform P --generate-hashes`. Both use the user's uv cache, warmed by one unmeasured run each,
and alternate run by run; the figures are median wall times (the work is mostly waiting on the index).
Goal: envpin <= 1.3x uv. A third row gives uv the interpreter with --python, as envpin does (uv then skips
interpreter discovery, which on a machine with pyenv's shims on PATH costs more than the resolution): the
ratio to it is envpin's own overhead (start-up, the Docker SDK, checking the files against the image's tags).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

GOAL = 1.3
IMAGE = "127.0.0.1:5000/envpin-test/python36-base:1"
NGC = "20.02-tf2-py3"  # the NGC tag the stand-in stands in for (what the lock records)
REQUIREMENTS = "pydantic==1.9.2\npandas\nrequests\n"


def _envpin() -> list[str]:
    script = Path(sys.executable).with_name("envpin")
    return [str(script)] if script.exists() else [sys.executable, "-m", "envpin"]


def commands(work: Path, image: str) -> dict[str, list[str]]:
    import docker

    from envpin.environment import resolve

    facts = resolve.image_facts(docker.from_env(), image)
    if facts.tags is None:
        raise SystemExit(f"{image}'s pip does not say which wheels it accepts; choose another --image")
    platform = resolve.manylinux_platform(facts.tags)
    return {
        "envpin lock": [
            *_envpin(),
            "-q",
            "lock",
            "requirements.in",
            "--ngc",
            NGC,
            "--base-image",
            image,
            "--resolver",
            "host",
            "--out",
            str(work / "requirements.lock"),
        ],
        "uv pip compile": [
            resolve.uv_binary(),
            "pip",
            "compile",
            "requirements.in",
            "--python-version",
            facts.python,
            "--python-platform",
            platform,
            "--generate-hashes",
            "-o",
            str(work / "uv.txt"),
            "--quiet",
        ],
        # The same with the interpreter named, as envpin names it: uv then skips interpreter discovery.
        "uv ... --python": [
            resolve.uv_binary(),
            "pip",
            "compile",
            "requirements.in",
            "--python-version",
            facts.python,
            "--python-platform",
            platform,
            "--generate-hashes",
            "-o",
            str(work / "uv-python.txt"),
            "--quiet",
            "--python",
            sys.executable,
        ],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--image", default=IMAGE, help="stand-in image whose Python the lock is for")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()
    try:
        socket.create_connection(("pypi.org", 443), timeout=5).close()
    except OSError:
        print("PyPI (pypi.org:443) is not reachable: this benchmark needs it", file=sys.stderr)
        return 2
    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else []
    with tempfile.TemporaryDirectory(prefix="envpin-bench-lock-") as tmp:
        work = Path(tmp)
        (work / "requirements.in").write_text(REQUIREMENTS)
        cmds = commands(work, args.image)
        times: dict[str, list[float]] = {name: [] for name in cmds}
        for cmd in cmds.values():  # warm-up: uv's cache, the image, .pyc files
            subprocess.run(cmd, cwd=work, check=True, stdout=subprocess.DEVNULL)
        for _ in range(args.runs):
            for name, cmd in cmds.items():
                start = time.perf_counter()
                subprocess.run(cmd, cwd=work, check=True, stdout=subprocess.DEVNULL)
                times[name].append(time.perf_counter() - start)
    med = {name: statistics.median(t) for name, t in times.items()}
    ratio = med["envpin lock"] / med["uv pip compile"]
    named = med["envpin lock"] / med["uv ... --python"]
    figures = {
        "runs": args.runs,
        "image": args.image,
        "requirements": REQUIREMENTS.split(),
        "median_s": {n: round(m, 3) for n, m in med.items()},
        "min_s": {n: round(min(t), 3) for n, t in times.items()},
        "ratio": round(ratio, 2),
        "ratio_to_uv_with_python": round(named, 2),
        "goal": GOAL,
        "met": ratio <= GOAL,
        "load_average": load,
        "cpus": os.cpu_count(),
    }
    if args.json:
        print(json.dumps(figures, indent=2, sort_keys=True))
    else:
        print(f"{args.runs} runs each, alternating, warm uv cache; load average {' '.join(load)}; target {args.image}")
        for name in cmds:
            print(f"  {name:<16} median {med[name]:6.3f} s  min {min(times[name]):6.3f} s")
        print(f"envpin lock / uv pip compile: {ratio:.2f}x (goal <= {GOAL}x): {'met' if ratio <= GOAL else 'NOT met'}")
        print(f"envpin lock / uv pip compile --python (no interpreter discovery; no goal): {named:.2f}x")
    return 0 if ratio <= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
