"""Benchmark: the envpin probe's default fingerprint against PyTorch's collect_env, side by side in one run.

    .venv/bin/python benchmarks/bench_probe.py [--runs 9] [--json]

Both are measured the same way: wall time of a fresh interpreter process (``python -m ...``), the two
commands alternating run by run after one unmeasured warm-up each, so both see the same machine state and
file cache. The probe runs as the images run it (``python -m envpin.probe --no-selftest --json /dev/null``): no
TensorFlow import, no self-test. collect_env needs ``pip install torch`` (it imports torch).

How fields are counted (what each tool *records*, not how many lines it prints):

* envpin probe: the leaves of its report (``envpin.probe.flatten``: one dotted key per value, e.g.
  ``cpu.isa_level``, ``packages.distributions.numpy``), counting only leaves that hold a value; fields
  that are "unavailable" (no GPU here) or hold an error are left out.
* collect_env: every output line of the form ``Key: value`` whose value is not empty, "N/A" or
  "Could not collect" (this includes each line of the ``lscpu`` block it embeds), plus every
  ``[pip3] name==version`` / ``[conda] ...`` line that names a package. Headings and blank lines are not
  counted. "N/A" and "Could not collect" are collect_env's way of saying what the probe calls
  "unavailable", so both sides leave them out.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from envpin.probe import flatten  # noqa: E402  (the repository is put on sys.path above)

GOAL_SPEEDUP = 5.0
GOAL_FIELDS = 2.0
GOAL_SECONDS = 0.3


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    return env


def _timed(cmd: list[str], cwd: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, text=True, check=False)
    return time.perf_counter() - start, proc


def probe_fields(report: dict) -> int:
    flat = flatten(report)
    return sum(1 for v in flat.values() if v != "unavailable" and not v.startswith("error:"))


NO_VALUE = ("", "N/A", "Could not collect")


def collect_env_fields(text: str) -> int:
    count = 0
    for line in text.splitlines():
        m = re.match(r"^\s*\[(pip3?|conda)\]\s+(.*)$", line)
        if m:
            count += m.group(2).strip() not in NO_VALUE
            continue
        m = re.match(r"^([^:\[][^:]*):\s*(.*)$", line)
        if m and m.group(2).strip() not in NO_VALUE:
            count += 1
    return count


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=9, help="measured runs of each command (default 9)")
    ap.add_argument("--json", action="store_true", help="print the results as JSON on stdout")
    args = ap.parse_args()

    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        probe_cmd = [py, "-m", "envpin.probe", "--no-selftest", "--json", os.devnull]
        torch_cmd = [py, "-m", "torch.utils.collect_env"]

        # One run of each whose output is kept, for the field counts (and as the warm-up).
        report_path = Path(tmp) / "report.json"
        _, p = _timed([py, "-m", "envpin.probe", "--no-selftest", "--json", str(report_path)], tmp)
        if p.returncode != 0:
            sys.stderr.write(p.stderr)
            return 2
        _, t = _timed(torch_cmd, tmp)
        if t.returncode != 0:
            sys.stderr.write("collect_env failed (is torch installed? pip install torch):\n" + t.stderr[-2000:])
            return 2
        n_probe = probe_fields(json.loads(report_path.read_text()))
        n_torch = collect_env_fields(t.stdout)

        probe_times: list[float] = []
        torch_times: list[float] = []
        for _ in range(args.runs):
            dt, p = _timed(probe_cmd, tmp)
            assert p.returncode == 0, p.stderr
            probe_times.append(dt)
            dt, t = _timed(torch_cmd, tmp)
            assert t.returncode == 0, t.stderr
            torch_times.append(dt)

    mp, mt = statistics.median(probe_times), statistics.median(torch_times)
    result = {
        "runs": args.runs,
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "probe": {"median_s": round(mp, 4), "min_s": round(min(probe_times), 4),
                  "max_s": round(max(probe_times), 4), "fields": n_probe},
        "collect_env": {"median_s": round(mt, 4), "min_s": round(min(torch_times), 4),
                        "max_s": round(max(torch_times), 4), "fields": n_torch},
        "speedup": round(mt / mp, 1),
        "field_ratio": round(n_probe / n_torch, 2) if n_torch else None,
    }
    result["goals_met"] = {
        f"speedup >= {GOAL_SPEEDUP}x": result["speedup"] >= GOAL_SPEEDUP,
        f"fields >= {GOAL_FIELDS}x": bool(result["field_ratio"] and result["field_ratio"] >= GOAL_FIELDS),
        f"probe < {GOAL_SECONDS} s": mp < GOAL_SECONDS,
    }
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
        return 0
    print(f"{args.runs} runs each, alternating, after one warm-up; {os.cpu_count()} CPUs; Python {result['python']}")
    print(f"{'':14} {'median':>9} {'min':>9} {'max':>9} {'fields':>7}")
    for name, key in (("envpin probe", "probe"), ("collect_env", "collect_env")):
        r = result[key]
        print(f"{name:14} {r['median_s']:8.3f}s {r['min_s']:8.3f}s {r['max_s']:8.3f}s {r['fields']:7d}")
    print(f"ratio: probe is {result['speedup']}x faster and records {result['field_ratio']}x the fields")
    for goal, ok in result["goals_met"].items():
        print(f"  {'met' if ok else 'NOT met':8} {goal}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
