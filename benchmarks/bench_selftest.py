"""Wall time and peak memory of the determinism self-test (op battery + golden hash + seed hygiene).

    python benchmarks/bench_selftest.py [--repeat N] [--compare] [--replicas N] [--json]

Runs ``envpin.probe.selftest.run_selftest`` (full, then --quick) in a fresh Python process per repetition and
reports, per mode: wall seconds, the largest single child's peak RSS (resource.getrusage(RUSAGE_CHILDREN),
what the goal "< 2 GB" is read against) and the peak of the summed RSS of all processes of the run
(sampled from /proc every 50 ms: children run concurrently, so this is what the machine must hold).
Goals: full < 30 s and < 2 GB; --quick < 10 s. With ``--replicas N`` it runs --quick and --quick with the
multi-replica self-test alternately, side by side under the same load, and reports the ratio of their
medians (target: within 1.5x). The load average before and after is printed with the
figures: on a shared 2-CPU machine the load moves the wall time more than the battery does.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GOALS = {"full": {"seconds": 30.0, "peak_mb": 2048.0}, "quick": {"seconds": 10.0, "peak_mb": 2048.0}}
# The runner measures its own children: ru_maxrss of RUSAGE_CHILDREN is the largest descendant it waited for
# (KiB on Linux; grandchildren are folded in as they are reaped), so each run's figure stands alone.
RUNNER = (
    "import json, resource, sys\n"
    "from envpin.probe.selftest import run_selftest\n"
    "r = run_selftest(compare=%(compare)s, quick=%(quick)s, replicas=%(replicas)s)\n"
    "kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
    "me = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
    "sys.stdout.write(json.dumps({'summary': r.get('summary'), 'skipped': r.get('skipped'),"
    " 'golden_equal': (r.get('golden') or {}).get('runs_equal'), 'errors': r.get('errors', []),"
    " 'replicas': {k: (r.get('replicas') or {}).get(k, {}).get('verdict') for k in ('mirrored', 'multi_worker')},"
    " 'children_maxrss_kb': kids, 'self_maxrss_kb': me}))\n"
)


def _tree_rss_kb(root: int) -> int:
    """Sum of VmRSS over root and all its descendants (Linux /proc)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as fh:
                ppid, kb = 0, 0
                for line in fh:
                    if line.startswith("PPid:"):
                        ppid = int(line.split()[1])
                    elif line.startswith("VmRSS:"):
                        kb = int(line.split()[1])
        except (OSError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
        rss[int(entry)] = kb
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total


def run_once(quick: bool, compare: bool, replicas: int | None = None) -> dict:
    code = RUNNER % {"compare": compare, "quick": quick, "replicas": replicas}
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    peak = {"kb": 0}
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak["kb"] = max(peak["kb"], _tree_rss_kb(proc.pid))
            done.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    seconds = time.monotonic() - started
    done.set()
    sampler.join()
    if proc.returncode not in (0, 1):
        raise SystemExit(f"self-test run failed (exit {proc.returncode}):\n{err[-2000:]}")
    result = json.loads(out.strip().splitlines()[-1])
    if result.get("skipped"):
        raise SystemExit(f"self-test skipped: {result['skipped']}")
    return {
        "seconds": round(seconds, 2),
        "largest_child_mb": round(result["children_maxrss_kb"] / 1024.0, 1),
        "parent_mb": round(result["self_maxrss_kb"] / 1024.0, 1),
        "sum_rss_peak_mb": round(peak["kb"] / 1024.0, 1),
        "summary": result["summary"],
        "golden_runs_equal": result["golden_equal"],
        "errors": result["errors"],
        "replicas": result["replicas"],
    }


def loadavg() -> str:
    """The 1/5/15-minute load averages (Linux), recorded next to every figure."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def count_checks() -> dict:
    from envpin.probe.selftest import CHECKS

    return {"full": len(CHECKS), "quick": sum(1 for c in CHECKS if c.quick)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--compare", action="store_true", help="also time the --compare battery")
    parser.add_argument("--replicas", type=int, default=None, help="time --quick against --quick --replicas N")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    if args.replicas:
        return replicas_ratio(args.replicas, args.repeat, args.json)
    modes = [("full", False, False), ("quick", True, False)]
    if args.compare:
        modes.append(("full+compare", False, True))
    figures: dict = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "jobs": os.environ.get("ENVPIN_SELFTEST_JOBS", "default"),
        "checks": count_checks(),
        "loadavg_before": loadavg(),
    }
    for name, quick, compare in modes:
        runs = [run_once(quick, compare) for _ in range(args.repeat)]
        secs = sorted(r["seconds"] for r in runs)
        figures[name] = {
            "runs": runs,
            "seconds_median": secs[len(secs) // 2],
            "seconds_max": secs[-1],
            "largest_child_mb": max(r["largest_child_mb"] for r in runs),
            "sum_rss_peak_mb": max(r["sum_rss_peak_mb"] for r in runs),
        }
    figures["loadavg_after"] = loadavg()
    if args.json:
        print(json.dumps(figures, indent=2, sort_keys=True))
        return 0
    print(
        f"{figures['machine']['cpus']} CPUs, Python {figures['machine']['python']}, jobs={figures['jobs']}, "
        f"{figures['checks']['full']} checks (quick {figures['checks']['quick']}), "
        f"load average {figures['loadavg_before']} before, {figures['loadavg_after']} after"
    )
    for name, _, _ in modes:
        f = figures[name]
        goal = GOALS.get(name.split("+")[0])
        verdict = ""
        if goal and name in GOALS:
            ok = f["seconds_max"] < goal["seconds"] and f["largest_child_mb"] < goal["peak_mb"]
            verdict = f"  goal {'met' if ok else 'MISSED'} (< {goal['seconds']:.0f} s, < {goal['peak_mb']:.0f} MB)"
        print(
            f"{name:13s} wall median {f['seconds_median']:6.2f} s (max {f['seconds_max']:.2f}), "
            f"largest child {f['largest_child_mb']:.0f} MB, summed RSS peak {f['sum_rss_peak_mb']:.0f} MB{verdict}"
        )
        print(f"{'':13s} {f['runs'][0]['summary']}; golden runs equal: {f['runs'][0]['golden_runs_equal']}")
    return 0


def replicas_ratio(replicas: int, repeat: int, as_json: bool) -> int:
    """--quick and --quick with the multi-replica self-test, alternated; the ratio of the medians."""
    before = loadavg()
    pairs = [(run_once(True, False), run_once(True, False, replicas)) for _ in range(repeat)]
    single = sorted(a["seconds"] for a, _ in pairs)
    multi = sorted(b["seconds"] for _, b in pairs)
    ratio = multi[len(multi) // 2] / single[len(single) // 2]
    figures = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "replicas": replicas,
        "quick_seconds": single,
        "quick_replicas_seconds": multi,
        "ratio_of_medians": round(ratio, 2),
        "verdicts": pairs[0][1]["replicas"],
        "loadavg_before": before,
        "loadavg_after": loadavg(),
    }
    if as_json:
        print(json.dumps(figures, indent=2, sort_keys=True))
        return 0
    print(
        f"{figures['machine']['cpus']} CPUs, Python {figures['machine']['python']}, {repeat} pairs, "
        f"load average {before} before, {figures['loadavg_after']} after"
    )
    print(f"--quick               {single} s")
    print(f"--quick --replicas {replicas}  {multi} s  ({figures['verdicts']})")
    print(f"ratio of medians {ratio:.2f}x: target (within 1.5x) {'met' if ratio <= 1.5 else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
