"""Benchmark: `envpin lock` on the host path against plain `uv pip compile --generate-hashes`, side by side.

    .venv/bin/python benchmarks/bench_lock.py [--runs 7] [--image REF] [--json]

Needs PyPI (pypi.org:443) and Docker with the Python 3.6 stand-in (tests/docker/test_lock_py36.py pushes it
to the local registry), whose lock runs on the host with uv. Both commands get the same requirements.in and
the same target: the image's Python version and the manylinux platform envpin derives from the wheel tags its
pip accepts (read once, up front). envpin's run is the real CLI in a fresh process (`envpin lock ...
--resolver host`: start-up, the image's ID from the engine, its facts from the kept copy (a throwaway
container the first time), uv, checking the files against the image's tags, writing the lock); the peer is
`uv pip compile requirements.in --python-version X --python-platform P --generate-hashes --python PY` with the
interpreter envpin names (`--python sys.executable`). A third row is the same without `--python`: uv then
looks for an interpreter itself, which on a machine with pyenv's shims on PATH costs more than the
resolution (docs/lock.md). All use the user's uv cache, warmed by one unmeasured run each, and alternate run
by run. The figure is CPU time (user + system of the process and every process it waited for: envpin's
includes its uv), the median; wall times are printed beside them (the work waits on the index). What the
engine does for envpin's request is the engine's CPU, not counted (one GET of an image's inspect).
Goal: envpin <= 1.3x uv with --python, in CPU time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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
#: Every module `envpin lock --resolver host` imports with the image's facts kept (the console script's own
#: start-up included): a process that imports only these is the lock's start-up without its work.
LOCK_IMPORTS = (
    "envpin.cli, envpin.cli.environment, envpin.api.environment, envpin.views.environment, envpin.environment.plan, "
    "envpin.environment.resolve, envpin.image.docker, envpin.knowledge.facts, envpin.knowledge.stock, "
    "envpin.files.write, packaging.requirements, packaging.utils, tomllib, uv"
)


def _envpin() -> list[str]:
    script = Path(sys.executable).with_name("envpin")
    return [str(script)] if script.exists() else [sys.executable, "-m", "envpin"]


def commands(work: Path, image: str) -> dict[str, list[str]]:
    from envpin.environment import resolve
    from envpin.image.docker import DockerEngine

    engine = DockerEngine()
    try:
        facts = resolve.image_facts(engine, image)
    finally:
        engine.close()
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
        # The peer: the interpreter named, as envpin names it (uv then skips interpreter discovery).
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
            str(work / "uv-python.txt"),
            "--quiet",
            "--python",
            sys.executable,
        ],
        # What every envpin command starts with (the interpreter and Typer; docs/cli.md "Start-up"): the part of
        # envpin's figure that no change to the lock path can cut.
        "import typer": [sys.executable, "-c", "import typer"],
        # The modules the lock imports, and nothing done: the rest of envpin's figure is its work.
        "lock's imports": [sys.executable, "-c", f"import {LOCK_IMPORTS}"],
        # The same without --python: uv looks for a Python 3.6 itself.
        "uv, discovering": [
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
            str(work / "uv-discovering.txt"),
            "--quiet",
        ],
    }


def _cpu() -> float:
    """User + system CPU of every child process waited for so far (a process's children included)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
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
        # Bytecode as an installed envpin has it: the warm-up writes the .pyc files even where the caller's
        # environment says not to (PYTHONDONTWRITEBYTECODE), or every run would compile envpin's modules again.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        cpu: dict[str, list[float]] = {name: [] for name in cmds}
        wall: dict[str, list[float]] = {name: [] for name in cmds}
        for cmd in cmds.values():  # warm-up: uv's cache, the image's kept facts, .pyc files
            subprocess.run(cmd, cwd=work, check=True, stdout=subprocess.DEVNULL, env=env)
        for _ in range(args.runs):
            for name, cmd in cmds.items():
                before, start = _cpu(), time.perf_counter()
                subprocess.run(cmd, cwd=work, check=True, stdout=subprocess.DEVNULL, env=env)
                wall[name].append(time.perf_counter() - start)
                cpu[name].append(_cpu() - before)
    load_after = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else []
    med = {name: statistics.median(t) for name, t in cpu.items()}
    ratio = med["envpin lock"] / med["uv pip compile"]
    discovering = med["envpin lock"] / med["uv, discovering"]
    figures = {
        "runs": args.runs,
        "image": args.image,
        "requirements": REQUIREMENTS.split(),
        "cpu_median_s": {n: round(m, 3) for n, m in med.items()},
        "cpu_min_s": {n: round(min(t), 3) for n, t in cpu.items()},
        "wall_median_s": {n: round(statistics.median(t), 3) for n, t in wall.items()},
        "ratio": round(ratio, 2),
        "ratio_to_uv_discovering": round(discovering, 2),
        # envpin's figure less uv's: what envpin adds, split into its start-up (the interpreter and Typer), the
        # rest of its imports, and its work (the plan, the engine's answer, the stand-in wheels, reading uv's
        # pylock.toml, checking the files against the image's tags, writing the lock).
        "added_s": {
            "start-up": round(med["import typer"], 3),
            "imports": round(med["lock's imports"] - med["import typer"], 3),
            "work": round(med["envpin lock"] - med["uv pip compile"] - med["lock's imports"], 3),
        },
        "goal": GOAL,
        "met": ratio <= GOAL,
        "load_average": load,
        "load_average_after": load_after,
        "cpus": os.cpu_count(),
    }
    if args.json:
        print(json.dumps(figures, indent=2, sort_keys=True))
    else:
        print(
            f"{args.runs} runs each, alternating, warm uv cache; CPU time (median); load average "
            f"{' '.join(load)} -> {' '.join(load_after)}; target {args.image}"
        )
        for name in cmds:
            print(
                f"  {name:<16} CPU median {med[name]:6.3f} s  min {min(cpu[name]):6.3f} s"
                f"  (wall median {statistics.median(wall[name]):6.3f} s)"
            )
        verdict = "met" if ratio <= GOAL else "NOT met"
        print(f"envpin lock / uv pip compile --python: {ratio:.2f}x (goal <= {GOAL}x): {verdict}")
        print(f"envpin lock / uv pip compile without --python (no goal): {discovering:.2f}x")
        added = figures["added_s"]
        print(
            "what envpin adds, in uv's time: "
            + ", ".join(f"{part} {s:.3f} s ({s / med['uv pip compile']:.2f}x)" for part, s in added.items())
        )
    return 0 if ratio <= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
