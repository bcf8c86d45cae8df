"""How the audit parser's variable scopes scale: Dockerfiles of N `ENV` (or `ARG`) lines in one stage, where every
instruction sees every earlier variable, and 40 `ARG`s that double each other.

    python benchmarks/bench_audit_scopes.py [--lines 5000 20000 50000] [--shape env|arg] [--repeat N] [--json]

Each file is audited as a user runs it, `envpin audit FILE --tf 2.4` in a fresh process with its output going
into a pipe; the figures are the median wall time and that process's peak resident set (ru_maxrss of the child).
Scopes are persistent maps shared between instructions (envpin.audit.scopes); copying the scope at every ARG/ENV
made memory grow with the square of the line count (20,000 lines: 5.2 GB).
Goals: 20,000 lines under 100 MB peak; the per-line time and the per-line memory above the interpreter's own of
the largest file within 2x of the smallest's (linear growth); the doubling ARGs under 100 MB and 2 s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ENVPIN = Path(sys.executable).with_name("envpin")
_CHILD = (
    "import resource, subprocess, sys, time\n"
    "t = time.monotonic()\n"
    "subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    "print(time.monotonic() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)


def dockerfile(shape: str, lines: int) -> str:
    if shape == "doubling":
        body = ["ARG A0=xx"] + [f"ARG A{i}=${{A{i - 1}}}${{A{i - 1}}}" for i in range(1, 41)]
        return "\n".join(["FROM ubuntu:22.04", *body, "RUN echo $A40"]) + "\n"
    keyword = "ENV" if shape == "env" else "ARG"
    # each line looks the previous variable up (${V:+set}), so substitution has work to do but values stay short
    return "FROM ubuntu:22.04\n" + "".join(
        f"{keyword} V{i}=value{i}_${{V{max(i - 1, 0)}:+set}}\n" for i in range(lines)
    )


def measure(path: Path, repeat: int) -> tuple[float, float]:
    """(median seconds, median peak RSS in MB) of `envpin audit` on `path`."""
    runs = []
    for _ in range(repeat):
        out = subprocess.run(
            [sys.executable, "-c", _CHILD, str(ENVPIN), "audit", "--tf", "2.4", str(path)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        runs.append((float(out[0]), int(out[1]) / 1024))
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, nargs="+", default=[5000, 20000, 50000])
    parser.add_argument("--shape", choices=["env", "arg"], default="env")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        empty = Path(tmp, "empty")
        empty.write_text("FROM ubuntu:22.04\n")
        _, base_mb = measure(empty, args.repeat)
        for n in sorted(args.lines):
            path = Path(tmp, f"{args.shape}-{n}")
            path.write_text(dockerfile(args.shape, n))
            seconds, mb = measure(path, args.repeat)
            results.append(
                {
                    "shape": args.shape,
                    "lines": n,
                    "seconds": round(seconds, 3),
                    "peak_mb": round(mb, 1),
                    "us_per_line": round(seconds / n * 1e6, 1),
                    "kb_per_line": round((mb - base_mb) * 1024 / n, 2),
                }
            )
        path = Path(tmp, "doubling")
        path.write_text(dockerfile("doubling", 0))
        seconds, mb = measure(path, args.repeat)
        results.append({"shape": "doubling", "lines": 42, "seconds": round(seconds, 3), "peak_mb": round(mb, 1)})
    first, last = results[0], results[-2]
    goals = {
        "20,000 lines under 100 MB": next((r["peak_mb"] < 100 for r in results if r["lines"] == 20000), None),
        "time per line within 2x": last["us_per_line"] <= 2 * first["us_per_line"],
        "memory per line within 2x": last["kb_per_line"] <= 2 * max(first["kb_per_line"], 0.5),
        "doubling ARGs under 100 MB and 2 s": results[-1]["peak_mb"] < 100 and results[-1]["seconds"] < 2,
    }
    load = Path("/proc/loadavg").read_text().split()[:3] if os.path.exists("/proc/loadavg") else []
    if args.json:
        print(
            json.dumps(
                {"results": results, "baseline_mb": round(base_mb, 1), "goals": goals, "loadavg": load}, indent=2
            )
        )
    else:
        print(f"baseline (a two-line Dockerfile): {base_mb:.1f} MB; load average {' '.join(load)}")
        for r in results:
            extra = f"  {r['us_per_line']} us/line  {r['kb_per_line']} KB/line" if "us_per_line" in r else ""
            print(f"{r['shape']:>8} {r['lines']:>6} lines  {r['seconds']:.2f} s  {r['peak_mb']:.1f} MB{extra}")
        for goal, met in goals.items():
            print(f"goal: {goal}: {'met' if met else 'NOT met' if met is not None else 'not measured'}")
    return 0 if all(v is not False for v in goals.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
