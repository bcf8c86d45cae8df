"""Benchmark: `envpin fleet report` on 1,000 nodes (aggregation, canonical JSON, the HTML page) and on 100,000,
side by side with reading and parsing the same report files (the floor).

    .venv/bin/python benchmarks/bench_fleet.py [--nodes 1000] [--runs 5] [--large 100000] [--json]

The reports are derived from a real one: the probe runs once on this machine (``python -m envpin.probe
--json -``, no TensorFlow import), and each node gets a copy made to look like a GPU node of an NGC
cluster: eight A100 GPUs read through NVML (the fields the probe's NVML collector writes), an NGC-sized
package set, its own host name, PID, time, GPU UUIDs and PCI slots, and a self-test golden hash. Then a
realistic minority varies: 5 % another driver minor version (risk), 2 % another OMP_NUM_THREADS and
0.5 % another NumPy (breaking), 3 nodes with H100s (another device class), one node whose golden hash
differs from its device class's, and 10 failed and 5 timed-out nodes. Figures are medians of --runs runs.
Reading the files (JSON parsing of every report) is timed separately: it depends on the disk cache.

The large point (--large N, 0 to skip) writes N such reports as files (compact JSON: the same parse tree,
written quickly) and runs the whole `fleet report` path on them (envpin.api.fleet_report: read, check,
reduce, aggregate, canonical JSON) in a fresh process, once, reporting its wall and CPU time and its peak
resident memory; the same process on a one-report folder gives the fixed part (interpreter, imports), so
(peak - fixed) / N is the memory a report costs. Goal: <= 40 KB a report, and time linear in N (the per-report
time of the large point against the 1,000-node one; the large point includes reading and parsing).

The floor: a fresh process that reads every report file of the same folder and parses it
(``json.loads(path.read_bytes().decode())``, nothing kept), at 1,000 reports (--runs times, alternating with
`fleet report`, medians) and at N (once each). Both time only the work (this process's CPU time), the
modules being imported first. Goal: `fleet report` within 2x the floor's CPU time at both sizes.

Measured (2-vCPU machine, Python 3.11.7, 782 fields a report): 1.62x the floor at 1,000 reports and
1.61x at 100,000 (47.9 s against 29.8 s), 5.1 KB a report, 1.29x linear (load average 0.9-1.1); 1.40x and 1.47x
with --large 10000 (load 0.2-0.5). Before the one-pass reduction
(envpin.fleet.aggregate.Reducer, envpin.files.read.Members): 6.53x at 1,000 and 8.47x at 10,000 (load 5-8).
Figures and how: docs/fleet.md, "One pass per report".
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from envpin.fleet import aggregate, inputs  # noqa: E402  (the repository is put on sys.path above)
from envpin.probe import flatten  # noqa: E402
from envpin.views.fleet import html_page  # noqa: E402

GOAL_SECONDS = 2.0
GOAL_KB_PER_REPORT = 40.0
#: Linear time: a report of the large point costs at most this much more than one of a 1,000-report run
#: of the same path (read, check, reduce, aggregate, JSON).
GOAL_LINEAR = 1.5
#: `fleet report` against reading and parsing the same files (the floor), CPU time.
GOAL_FLOOR = 2.0
A100 = "NVIDIA A100-SXM4-80GB"
H100 = "NVIDIA H100 80GB HBM3"


def real_report() -> dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    out = subprocess.run(
        [sys.executable, "-m", "envpin.probe", "--no-selftest", "--json", "-"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    return json.loads(out)


def _v(value: Any, source: str = "nvml") -> dict[str, Any]:
    return {"value": value, "source": source}


def gpu_section(model: str, cc: str, driver: str, node: int) -> dict[str, Any]:
    """What the NVML collector (envpin.probe.nvml) records for an eight-GPU node."""
    g: dict[str, Any] = {
        "backend": _v("nvml", "ctypes libnvidia-ml.so.1"),
        "count": _v(8),
        "driver_version": _v(driver),
        "driver_major": _v(driver.split(".")[0]),
        "nvml_version": _v("12." + driver),
        "cuda_driver_version": _v("12.4"),
    }
    for i in range(8):
        dev = {
            "name": model,
            "uuid": f"GPU-{hashlib.md5(f'{node}-{i}'.encode()).hexdigest()}",
            "compute_capability": cc,
            "memory_total_bytes": 85899345920,
            "pci_bus_id": f"00000000:{i + 7:02X}:00.0",
            "ecc": "enabled",
            "mig": "disabled",
            "persistence_mode": "enabled",
            "compute_mode": "Default",
            "clocks_max_mhz": {"graphics": 1410, "memory": 1593, "sm": 1410},
            "clocks_applications_mhz": {"graphics": 1410, "memory": 1593},
            "power_limit_w": 400.0,
            "power_enforced_limit_w": 400.0,
            "vbios": "92.00.36.00.01",
        }
        for k, val in dev.items():
            g[f"devices.{i}.{k}"] = _v(val)
    return g


def ngc_base(base: dict[str, Any]) -> dict[str, Any]:
    """The real report with an NGC-sized package set."""
    base = copy.deepcopy(base)
    dists = base["packages"]["distributions"]["value"]
    dists.update({f"ngc-package-{i:03d}": f"{i % 7}.{i % 13}.{i % 3}" for i in range(350)})
    dists["numpy"] = "1.26.4"
    base["packages"]["count"]["value"] = len(dists)
    return base


def make_fleet(base: dict[str, Any], n: int) -> list[tuple[str, dict[str, Any] | aggregate.NodeFailure]]:
    base = ngc_base(base)
    return [node(base, i) for i in range(n)]


def node(base: dict[str, Any], i: int) -> tuple[str, dict[str, Any] | aggregate.NodeFailure]:
    """Node i of the fleet (see the module's docstring); shares the unchanged parts of `base`."""
    name = f"gpu-{i:04d}"
    if i % 100 == 37:
        return name, aggregate.NodeFailure(aggregate.FAILED, "probe exited 2 (Error)")
    if i % 200 == 73:
        return name, aggregate.NodeFailure(aggregate.TIMED_OUT, "the pod was not scheduled (Insufficient GPU)")
    r = dict(base)
    r["host"], r["env"] = dict(base["host"]), dict(base["env"])
    r["host"]["hostname"] = _v(name, "os.uname().nodename")
    r["host"]["pid"] = _v(1000 + i, "os.getpid()")
    r["host"]["time_utc"] = _v(f"2025-03-01T12:{i % 60:02d}:00Z", "datetime.now(utc)")
    h100 = i in (11, 511, 911)
    driver = "550.90.07" if i % 20 == 3 else "550.54.15"
    r["gpu"] = gpu_section(H100 if h100 else A100, "9.0" if h100 else "8.0", driver, i)
    r["env"]["OMP_NUM_THREADS"] = _v("4" if i % 50 == 5 else "8", "environ:OMP_NUM_THREADS")
    if i % 200 == 17:
        dists = {**base["packages"]["distributions"]["value"], "numpy": "1.26.3"}
        r["packages"] = {**base["packages"], "distributions": {**base["packages"]["distributions"], "value": dists}}
    device = f"gpu:{H100 if h100 else A100};cc={'9.0' if h100 else '8.0'};count=8"
    golden = "sha256:" + ("b" if h100 else "a") * 64
    if i == 423:
        golden = "sha256:" + "c" * 64
    r["selftest"] = {"golden": {"hash": golden, "device_class": device}}
    return name, r


def timed(fn: Any, runs: int) -> tuple[float, float, Any]:
    """Median wall time and median CPU time of this process (the CPU figure holds on a busy machine)."""
    walls, cpus, result = [], [], None
    for _ in range(runs):
        t, c = time.perf_counter(), time.process_time()
        result = fn()
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    return statistics.median(walls), statistics.median(cpus), result


def write_fleet(folder: Path, base: dict[str, Any], n: int) -> None:
    """N nodes' files as `fleet report` reads them: reports, and <node>.error.txt for failed nodes."""
    from envpin.fleet.inputs import error_file_text

    for i in range(n):
        name, item = node(base, i)
        if isinstance(item, aggregate.NodeFailure):
            (folder / f"{name}.error.txt").write_text(error_file_text(item.status, item.reason))
        else:
            (folder / f"{name}.json").write_text(json.dumps(item, sort_keys=True) + "\n")


def _report_child(folder: str) -> int:
    """In a fresh process: the whole `fleet report` path on one folder; prints time and peak memory."""
    # What fleet_report imports as it runs: imported first, so the time is the work's (imports are bench_cli's).
    import envpin.environment.lockfile
    import envpin.files.write
    import envpin.fleet.inputs
    import envpin.fleet.multiworker
    import envpin.probe.fields
    import envpin.reports.diff  # noqa: F401
    from envpin.api import fleet_report

    t, c = time.perf_counter(), time.process_time()
    result = fleet_report([Path(folder)]).result
    doc = aggregate.to_json_text(result)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    print(
        json.dumps(
            {
                "wall_s": wall,
                "cpu_s": cpu,
                "peak_kb": _peak_kb(),
                "nodes": result.counts()["nodes"],
                "classes": result.counts()["classes"],
                "json_bytes": len(doc),
            }
        )
    )
    return 0


def _floor_child(folder: str) -> int:
    """In a fresh process: every report file of the folder read and parsed, nothing kept (the floor)."""
    t, c = time.perf_counter(), time.process_time()
    count = 0
    for path in sorted(Path(folder).iterdir()):
        if path.suffix == ".json":
            json.loads(path.read_bytes().decode("utf-8"))
            count += 1
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    print(json.dumps({"wall_s": wall, "cpu_s": cpu, "peak_kb": _peak_kb(), "files": count}))
    return 0


def _peak_kb() -> int:
    # VmHWM: this process's own peak (ru_maxrss would carry the parent's from before the exec).
    status = Path("/proc/self/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")))


def _run_child(folder: Path, flag: str = "--report-child") -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, flag, str(folder)],
        capture_output=True,
        text=True,
        check=True,
        timeout=3600,
    ).stdout
    return json.loads(out)


def large_point(base: dict[str, Any], n: int, runs: int) -> dict[str, Any]:
    """`fleet report` on 1, 1,000 and N generated report files, each in a fresh process, and the floor
    beside it at 1,000 (`runs` times, alternating) and N (see the docstring)."""
    base = ngc_base(base)
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="envpin-bench-fleet-large-") as tmp:
        report_runs, floor_runs = {}, {}
        for count in (1, 1000, n):
            folder = Path(tmp) / str(count)
            folder.mkdir()
            write_fleet(folder, base, count)
            times = 1 if count == 1 else runs if count == 1000 else 1
            pairs = [(_run_child(folder, "--floor-child"), _run_child(folder)) for _ in range(times)]
            floor_runs[count] = [f for f, _ in pairs]
            report_runs[count] = [r for _, r in pairs]
            shutil.rmtree(folder)
    med = {count: statistics.median(r["cpu_s"] for r in rs) for count, rs in report_runs.items()}
    floor = {count: statistics.median(r["cpu_s"] for r in rs) for count, rs in floor_runs.items()}
    large = report_runs[n][0]
    fixed_kb = report_runs[1][0]["peak_kb"]
    per_kb = (large["peak_kb"] - fixed_kb) / n
    per_ms_small = med[1000] / 1000 * 1000
    per_ms_large = med[n] / n * 1000
    figures.update(
        {
            "nodes": n,
            "wall_s": round(large["wall_s"], 1),
            "cpu_s": round(large["cpu_s"], 1),
            "peak_mb": round(large["peak_kb"] / 1024, 1),
            "fixed_mb": round(fixed_kb / 1024, 1),
            "kb_per_report": round(per_kb, 1),
            "goal_kb_per_report": GOAL_KB_PER_REPORT,
            "cpu_ms_per_report": round(per_ms_large, 3),
            "cpu_ms_per_report_1000": round(per_ms_small, 3),
            "time_ratio": round(per_ms_large / per_ms_small, 2),
            "goal_time_ratio": GOAL_LINEAR,
            "classes": large["classes"],
            "cpu_s_1000": round(med[1000], 3),
            "floor_cpu_s_1000": round(floor[1000], 3),
            "floor_ratio_1000": round(med[1000] / floor[1000], 2),
            "floor_cpu_s": round(floor[n], 1),
            "floor_ratio": round(med[n] / floor[n], 2),
            "floor_peak_mb": round(floor_runs[n][0]["peak_kb"] / 1024, 1),
            "goal_floor_ratio": GOAL_FLOOR,
            "runs_1000": runs,
        }
    )
    figures["met"] = (
        per_kb <= GOAL_KB_PER_REPORT
        and per_ms_large / per_ms_small <= GOAL_LINEAR
        and max(figures["floor_ratio_1000"], figures["floor_ratio"]) <= GOAL_FLOOR
    )
    return figures


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--large", type=int, default=100_000, help="nodes of the large point (0: skip it)")
    ap.add_argument("--report-child", metavar="DIR", help=argparse.SUPPRESS)
    ap.add_argument("--floor-child", metavar="DIR", help=argparse.SUPPRESS)
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()
    if args.report_child:
        return _report_child(args.report_child)
    if args.floor_child:
        return _floor_child(args.floor_child)

    base = real_report()
    nodes = make_fleet(base, args.nodes)
    agg_s, agg_cpu, result = timed(lambda: aggregate.aggregate(nodes), args.runs)
    json_s, json_cpu, doc = timed(lambda: aggregate.to_json_text(result), args.runs)
    html_s, html_cpu, page = timed(lambda: html_page(result), args.runs)
    with tempfile.TemporaryDirectory(prefix="envpin-bench-fleet-") as tmp:
        for name, item in nodes:
            if isinstance(item, dict):
                (Path(tmp) / f"{name}.json").write_text(json.dumps(item, sort_keys=True, indent=2) + "\n")
        read_s, _, _ = timed(lambda: inputs.read([Path(tmp)]), args.runs)
    total, total_cpu = agg_s + json_s + html_s, agg_cpu + json_cpu + html_cpu
    c = result.counts()
    figures = {
        "nodes": args.nodes,
        "fields_per_report": len(flatten(next(item for _, item in nodes if isinstance(item, dict)))),
        "aggregate_s": round(agg_s, 3),
        "json_s": round(json_s, 3),
        "html_s": round(html_s, 3),
        "total_s": round(total, 3),
        "total_cpu_s": round(total_cpu, 3),
        "read_files_s": round(read_s, 3),
        "json_bytes": len(doc.encode()),
        "html_bytes": len(page),
        "classes": c["classes"],
        "outliers": c["outliers"],
        "breaking": c["breaking"],
        "risk": c["risk"],
        "failed": c["failed"],
        "timed_out": c["timed_out"],
        "load_average_1min": round(os.getloadavg()[0], 2),
        "cpus": os.cpu_count(),
        "goal_s": GOAL_SECONDS,
        "met": total < GOAL_SECONDS,
    }
    large = large_point(base, args.large, args.runs) if args.large > 0 else None
    figures["large"] = large
    if args.json:
        print(json.dumps(figures, indent=2, sort_keys=True))
    else:
        print(
            f"{args.nodes} nodes, {figures['fields_per_report']} fields per report "
            f"(median of {args.runs} runs, Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
            f"load average {figures['load_average_1min']})"
        )
        print(
            f"  aggregate {agg_s:.3f} s + JSON {json_s:.3f} s ({figures['json_bytes'] / 1e6:.1f} MB) "
            f"+ HTML {html_s:.3f} s ({figures['html_bytes'] / 1e6:.1f} MB) = {total:.3f} s wall, "
            f"{total_cpu:.3f} s CPU (goal < {GOAL_SECONDS} s: {'met' if figures['met'] else 'NOT met'})"
        )
        print(f"  reading {args.nodes - c['failed'] - c['timed_out']} report files: {read_s:.3f} s")
        print(
            f"  result: {c['classes']} classes, {c['outliers']} outliers, {c['breaking']} breaking and "
            f"{c['risk']} risk fields, {c['failed']} failed, {c['timed_out']} timed out"
        )
        if large:
            print(
                f"{large['nodes']} report files, fleet report in a fresh process (read, check, reduce, aggregate, "
                f"JSON): {large['wall_s']} s wall, {large['cpu_s']} s CPU, peak {large['peak_mb']} MB "
                f"({large['fixed_mb']} MB with one report)"
            )
            print(
                f"  against reading and parsing the same files (the floor), CPU: {large['cpu_s_1000']} s / "
                f"{large['floor_cpu_s_1000']} s = {large['floor_ratio_1000']}x at 1,000 reports (medians of "
                f"{large['runs_1000']}), {large['cpu_s']} s / {large['floor_cpu_s']} s = {large['floor_ratio']}x at "
                f"{large['nodes']:,} (goal <= {GOAL_FLOOR}x); the floor's peak {large['floor_peak_mb']} MB"
            )
            print(
                f"  {large['kb_per_report']} KB a report (goal <= {GOAL_KB_PER_REPORT:.0f} KB); "
                f"{large['cpu_ms_per_report']} ms CPU a report against {large['cpu_ms_per_report_1000']} ms "
                f"with 1,000 reports: {large['time_ratio']}x (goal <= {GOAL_LINEAR}x, linear): "
                f"{'met' if large['met'] else 'NOT met'}"
            )
    met = figures["met"] and (large is None or large["met"])
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
