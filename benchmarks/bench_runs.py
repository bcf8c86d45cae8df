"""Benchmark: what envpin's run hook (the sitecustomize that `bisect`, `study` and `cost` put on PYTHONPATH)
costs a command, side by side with the same command without it.

    .venv/bin/python benchmarks/bench_runs.py [--runs 5] [--json] [--only VARIANT ...]

Each variant runs as a fresh process; the variants alternate run by run after one unmeasured warm-up each,
so all see the same machine state. The figure is the median CPU time of the child (user + system, getrusage),
which a shared machine moves far less than wall time. Targets, as ratios within one run:

* `python -c pass` with the hook <= 1.2x without it (the hook's start-up: it imports nothing heavy);
* a tiny Keras training (tests/runs/scripts/dense.py: 2 epochs of 8 steps) with the hook, seeded through
  ENVPIN_SEED (the `study` arms), <= 1.10x without it.

The same training with full-tensor debugger dumps (what each run of `bisect` does) is printed alongside,
without a target: its cost is TensorFlow's debugger, which writes every op's output to disk. Against two of
those runs:

* `envpin bisect --whole-run` of the same training (its two runs and the comparison of their dumps, with
  envpin's own start-up) <= 1.3x two dumped runs.

`--only` measures the variants named and their peers (e.g. `--only bisect`).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TRAIN = REPO / "tests" / "runs" / "scripts" / "dense.py"
#: variant -> (its peer, the ratio it must stay within; None: the ratio is printed, with no target)
TARGETS: dict[str, tuple[str, float | None]] = {
    "python -c pass, hook": ("python -c pass", 1.2),
    "keras fit, hook + seed": ("keras fit", 1.10),
    "keras fit, hook + dump": ("keras fit", None),
    "bisect": ("keras fit, hook + dump", 1.3),
}
#: variant -> how many runs of its peer it is measured against (1 when not named)
PEER_RUNS = {"bisect": 2}


def _cpu_seconds(cmd: list[str], env: dict[str, str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {proc.stderr[-500:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def variants(root: Path) -> dict[str, tuple[list[str], dict[str, str]]]:
    from envpin.runs import launch

    hook = launch.hook_folder(root)
    plain = {k: v for k, v in os.environ.items() if not k.startswith("ENVPIN_")}
    counter = iter(range(1_000_000))

    def hooked(spec: launch.RunSpec) -> dict[str, str]:
        out = root / f"out-{next(counter)}"
        out.mkdir()
        return launch.environment(spec, hook, out, plain)

    py = [sys.executable]
    return {
        "python -c pass": ([*py, "-c", "pass"], plain),
        "python -c pass, hook": ([*py, "-c", "pass"], hooked(launch.RunSpec("b", seed=1))),
        "keras fit": ([*py, str(TRAIN)], plain),
        "keras fit, hook + seed": ([*py, str(TRAIN)], hooked(launch.RunSpec("b", seed=1))),
        "keras fit, hook + dump": ([*py, str(TRAIN)], hooked(launch.RunSpec("b", seed=1, dump=True))),
        # its two runs are the dumped run above (whole, seed 42 instead of 1: the same ops and sizes)
        "bisect": ([*py, "-m", "envpin", "bisect", "--whole-run", "--", *py, str(TRAIN)], plain),
    }


def chosen(every: list[str], names: list[str] | None) -> list[str]:
    """The variants to measure, in `every`'s order: `names` and their peers (all of them when None)."""
    if not names:
        return every
    unknown = sorted(set(names) - set(every))
    if unknown:
        raise SystemExit(f"unknown variant(s) {', '.join(unknown)}: pick from {', '.join(every)}")
    wanted = set(names) | {TARGETS[n][0] for n in names if n in TARGETS}
    return [name for name in every if name in wanted]


def measure(runs: int, names: list[str] | None = None) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="envpin-bench-runs-") as tmp:
        every = variants(Path(tmp))
        cases = {name: every[name] for name in chosen(list(every), names)}
        for cmd, env in cases.values():  # warm-up: file cache, .pyc files
            _cpu_seconds(cmd, env)
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(runs):
            for name, (cmd, env) in cases.items():
                if "dump" in name:  # a fresh dump folder each time: the debugger appends to an existing one
                    dump = Path(env["ENVPIN_RUNS_DUMP"])
                    for path in sorted(dump.rglob("*"), reverse=True):
                        path.rmdir() if path.is_dir() else path.unlink()
                times[name].append(_cpu_seconds(cmd, env))
    return {name: statistics.median(values) for name, values in times.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="CPU time of commands with and without envpin's run hook.")
    parser.add_argument("--runs", type=int, default=5, help="measured runs per variant (after one warm-up)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--only", nargs="+", metavar="VARIANT", help="measure these variants and their peers")
    args = parser.parse_args(argv)
    medians = measure(args.runs, args.only)
    rows = []
    for name, seconds in medians.items():
        peer, limit = TARGETS.get(name, (None, None))
        if peer not in medians:  # a peer's own peer, left out by --only
            peer, limit = None, None
        times = PEER_RUNS.get(name, 1)
        ratio = seconds / (times * medians[peer]) if peer else None
        rows.append(
            {
                "variant": name,
                "cpu_seconds": round(seconds, 3),
                "peer": peer if times == 1 or peer is None else f"{times} x {peer}",
                "ratio": None if ratio is None else round(ratio, 3),
                "target": limit,
                "met": None if ratio is None or limit is None else ratio <= limit,
            }
        )
    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else []
    if args.json:
        sys.stdout.write(json.dumps({"runs": args.runs, "loadavg": load, "rows": rows}, indent=2) + "\n")
    else:
        sys.stdout.write(f"median CPU seconds over {args.runs} runs (load average {' '.join(load)})\n")
        for row in rows:
            verdict = (
                "no target"
                if row["target"] is None
                else f"target <= {row['target']}x: {'met' if row['met'] else 'MISSED'}"
            )
            target = f"  {row['ratio']:.2f}x {row['peer']} ({verdict})" if row["peer"] else ""
            sys.stdout.write(f"{row['variant']:<26} {row['cpu_seconds']:>8.3f}{target}\n")
    return 0 if all(r["met"] is not False for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
