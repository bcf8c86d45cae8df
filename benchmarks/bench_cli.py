"""Benchmark: the CLI's start-up, side by side with its floor (Python alone, importing Typer) and hadolint.

    .venv/bin/python benchmarks/bench_cli.py [--runs 15] [--json]

Each command runs as a fresh process (the installed `envpin` console script, as users run it); all commands
alternate run by run after one unmeasured warm-up each, so all see the same machine state and file cache.
The figure is the median CPU time of the process (user + system, getrusage of the children): on a shared
machine it moves far less than wall time, and the ratios are taken within one run. Targets, as ratios:

* every command's start-up: `envpin --version`, `envpin --help`, `envpin catalog`,
  `envpin recipe --ngc 20.02-tf2-py3` and `envpin audit` of one small Dockerfile (FROM an NGC tag, ENV, one
  pip RUN) <= 1.3x `python -c "import typer"` (Typer is the CLI library: its import is the floor every
  command of a Typer CLI pays);
* `envpin audit` of 200 small Dockerfiles in one call <= 2x hadolint given the same 200 files
  (.venv/bin/hadolint, or hadolint on PATH): the audit's own work per file, with the start-up spread over many.

`envpin probe -o -` and `python -c pass` are printed alongside (no target) to show what is not envpin's, and
so is the floor of any Python audit that consults the catalog: a program that imports only `re`, `json` and
`hashlib`, checks the shipped catalog's SHA-256, parses it and splits the Dockerfile into instructions.

Every command runs in the benchmark's temporary folder, as a one-file CI step or pre-commit hook of a repository
without envpin configuration runs (so neither envpin nor hadolint reads a configuration file of the folder the
benchmark was started from; a pyproject.toml that configures envpin costs the TOML parser, about 4 ms more).

Every Python process runs with compiled bytecode, as an installed package has it (pip compiles at install):
the children get a private PYTHONPYCACHEPREFIX (written by the warm-up run) and PYTHONDONTWRITEBYTECODE
unset, so neither envpin nor Typer pays for compiling its sources, whatever the caller's environment says.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

TYPER = "python -c 'import typer'"
HADOLINT = "hadolint Dockerfile"
AUDIT_MANY = "envpin audit 200 Dockerfiles"
HADOLINT_MANY = "hadolint 200 Dockerfiles"
#: How many small Dockerfiles the one-call audit is given (each a variation of DOCKERFILE).
MANY = 200
#: command -> (the peer it is measured against, the ratio it must stay within)
TARGETS = {
    "envpin --help": (TYPER, 1.3),
    "envpin --version": (TYPER, 1.3),
    "envpin catalog": (TYPER, 1.3),
    "envpin recipe --ngc 20.02-tf2-py3": (TYPER, 1.3),
    "envpin audit Dockerfile": (TYPER, 1.3),
    AUDIT_MANY: (HADOLINT_MANY, 2.0),
}
FLOOR = "python: catalog + file (floor)"
#: The floor program: what every audit of a FROM line must at least do in Python, with the fewest modules.
_FLOOR_CODE = (
    "import hashlib, json, os, re, sys\n"
    "import envpin\n"
    "raw = open(os.path.join(os.path.dirname(envpin.__file__), 'data', 'catalog.json'), 'rb').read()\n"
    "hashlib.sha256(raw).hexdigest()\n"
    "catalog = json.loads(raw)\n"
    "lines = [re.match(r'\\s*(\\w+)\\s+(.*)', x) for x in open(sys.argv[1]).read().splitlines()]\n"
)
DOCKERFILE = (
    "FROM nvcr.io/nvidia/tensorflow:22.03-tf2-py3\n"
    "ENV TF_DETERMINISTIC_OPS=1 PYTHONHASHSEED=0\n"
    "RUN pip install --no-cache-dir numpy==1.22.0\n"
)


def _envpin() -> list[str]:
    script = Path(sys.executable).with_name("envpin")
    return [str(script)] if script.exists() else [shutil.which("envpin") or "envpin"]


def _hadolint() -> str | None:
    local = Path(sys.executable).with_name("hadolint")
    return str(local) if local.exists() else shutil.which("hadolint")


def many_dockerfiles(folder: Path) -> list[Path]:
    """MANY small Dockerfiles, each in its own folder (its build context), differing in their release and pins."""
    releases = ("20.02", "21.06", "22.03", "23.03", "24.01")
    paths = []
    for i in range(MANY):
        path = folder / f"p{i:03d}" / "Dockerfile"
        path.parent.mkdir(parents=True)
        text = DOCKERFILE.replace("22.03", releases[i % len(releases)]).replace("1.22.0", f"1.22.{i % 7}")
        path.write_text(text)
        paths.append(path)
    return paths


def commands(dockerfile: Path, many: list[Path]) -> dict[str, list[str]]:
    e = _envpin()
    cmds = {
        "envpin --help": [*e, "--help"],
        "envpin --version": [*e, "--version"],
        "envpin catalog": [*e, "catalog"],
        "envpin recipe --ngc 20.02-tf2-py3": [*e, "recipe", "--ngc", "20.02-tf2-py3"],
        "envpin audit Dockerfile": [*e, "audit", str(dockerfile)],
        "envpin probe -o -": [*e, "probe", "-o", "-"],
        "python -c pass": [sys.executable, "-c", "pass"],
        FLOOR: [sys.executable, "-c", _FLOOR_CODE, str(dockerfile)],
        TYPER: [sys.executable, "-c", "import typer"],
    }
    cmds[AUDIT_MANY] = [*e, "audit", *map(str, many)]
    hadolint = _hadolint()
    if hadolint:
        cmds[HADOLINT] = [hadolint, str(dockerfile)]
        cmds[HADOLINT_MANY] = [hadolint, *map(str, many)]
    return cmds


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def child_env(pycache: Path) -> dict[str, str]:
    """The environment of every measured process: bytecode written once (by the warm-up) and then used."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


def measure(
    cmds: dict[str, list[str]], runs: int, env: dict[str, str] | None = None, cwd: Path | None = None
) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in cmds}
    for cmd in cmds.values():  # warm-up: file cache, .pyc files
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=env, cwd=cwd)
    for _ in range(runs):
        for name, cmd in cmds.items():
            before = _cpu()
            subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=env, cwd=cwd)
            times[name].append(_cpu() - before)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else []
    with tempfile.TemporaryDirectory(prefix="envpin-bench-cli-") as tmp:
        dockerfile = Path(tmp) / "Dockerfile"
        dockerfile.write_text(DOCKERFILE)
        cmds = commands(dockerfile, many_dockerfiles(Path(tmp) / "many"))
        times = measure(cmds, args.runs, child_env(Path(tmp) / "pycache"), cwd=Path(tmp))
    med = {name: statistics.median(t) for name, t in times.items()}
    rows = {
        name: {
            "cpu_median_s": round(m, 4),
            "cpu_min_s": round(min(times[name]), 4),
            "vs_import_typer": round(m / med[TYPER], 2),
        }
        for name, m in med.items()
    }
    verdicts = {}
    for name, (peer, goal) in TARGETS.items():
        if peer not in med:
            verdicts[name] = {"peer": peer, "goal": goal, "ratio": None, "met": False}
            continue
        ratio = med[name] / med[peer]
        verdicts[name] = {"peer": peer, "goal": goal, "ratio": round(ratio, 2), "met": ratio <= goal}
    ok = all(v["met"] for v in verdicts.values())
    if args.json:
        print(
            json.dumps(
                {
                    "runs": args.runs,
                    "load_average": load,
                    "cpus": os.cpu_count(),
                    "met": ok,
                    "figures": rows,
                    "targets": verdicts,
                },
                indent=2,
                sort_keys=True,
            )
        )
        return 0 if ok else 1
    print(f"{args.runs} runs each, alternating; CPU time per process (median); load average {' '.join(load)}")
    print(f"{'command':<36} {'CPU median':>11} {'CPU min':>9} {'x import typer':>15}")
    for name, r in rows.items():
        print(f"{name:<36} {r['cpu_median_s']:>10.4f}s {r['cpu_min_s']:>8.4f}s {r['vs_import_typer']:>14.2f}x")
    for name, v in verdicts.items():
        ratio = "n/a (peer not installed)" if v["ratio"] is None else f"{v['ratio']:.2f}x"
        print(f"  {name:<36} {ratio:>8} {v['peer']} (goal <= {v['goal']}x): {'met' if v['met'] else 'NOT met'}")
    print("all targets met" if ok else "targets NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
