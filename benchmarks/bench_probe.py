"""Benchmark: the envpin probe's default fingerprint against PyTorch's collect_env, side by side in one run.

    .venv/bin/python benchmarks/bench_probe.py [--runs 9] [--json]
    .venv/bin/python benchmarks/bench_probe.py --images [--image REF ...] [--runs 9] [--json]
    .venv/bin/python benchmarks/bench_probe.py --against DIR [--runs 21] [--json]

--against DIR: this checkout's probe against the one in DIR (a copy of an earlier envpin, e.g.
``git archive <commit> envpin | tar -x -C DIR``), side by side: CPU time of the probe process (user + system,
getrusage of the children), the two alternating run by run after one warm-up each, in two settings: *bare*
(this machine as it is) and *distributed* (a temporary HOME with a ``.nccl.conf`` of twelve settings,
NCCL_CONF_FILE naming a second file, a topology file, NCCL_ALGO, TF_CONFIG and CUDA_VISIBLE_DEVICES set), so
the cost of the distributed section shows both where it records nothing and where it records everything it
can here; and the collectors' own CPU time in this process, all of them and the distributed section's (what
the new section costs without the interpreter's start-up around it). Goal: this checkout <= 1.05x DIR's in
both.

--images: the probe inside a container of each stand-in image (scripts/services.sh), three ways side by side,
all with that image's own Python, alternating run by run after one warm-up each, CPU time of the probe
process (user + system, getrusage of the children): *installed* (the payload's sources unpacked and compiled
the usual way, `python3 -m compileall`, as a pip-installed envpin runs), *archive* (PYTHONPATH=envpin.pyz
alone: what images ran before, compiling every module on every run) and *image* (what a built image runs:
`python3 -m envpin.probe.bytecode` at build time, PYTHONPATH=/opt/envpin/lib:envpin.pyz). Goal: image
<= 1.1x installed in every image.

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
GOAL_IN_IMAGE = 1.1
GOAL_AGAINST = 1.05
#: The stand-in images scripts/services.sh pushes to the local registry (Python 3.11, 3.9 and 3.6).
STAND_INS = (
    "127.0.0.1:5000/nvidia/tensorflow:20.02-tf2-py3",
    "127.0.0.1:5000/nvidia/tensorflow:21.06-tf2-py3",
    "127.0.0.1:5000/envpin-test/python36-base:1",
)
#: Runs inside the container with its Python (3.6+): prepares the three ways and times them.
_IN_IMAGE = r"""
import json, os, resource, statistics, subprocess, sys, zipfile
runs = int(sys.argv[1])
os.makedirs('/tmp/installed')
with zipfile.ZipFile('/work/envpin.pyz') as zf:
    zf.extractall('/tmp/installed', [n for n in zf.namelist() if n.startswith('envpin/')])
subprocess.check_call([sys.executable, '-m', 'compileall', '-q', '/tmp/installed'])
env = dict(os.environ, SOURCE_DATE_EPOCH='1582848000', PYTHONPATH='/work/envpin.pyz')
subprocess.check_call([sys.executable, '-m', 'envpin.probe.bytecode', '/work/envpin.pyz', '/tmp/lib'], env=env)
ways = {'installed': '/tmp/installed', 'archive': '/work/envpin.pyz', 'image': '/tmp/lib:/work/envpin.pyz'}
cpu = {w: [] for w in ways}
cmd = [sys.executable, '-m', 'envpin.probe', '--no-selftest', '--json', os.devnull]
for i in range(runs + 1):
    for way, path in ways.items():
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.check_call(cmd, env=dict(os.environ, PYTHONPATH=path), stdout=subprocess.DEVNULL)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if i:  # the first round warms the file cache
            cpu[way].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
print(json.dumps({'python': '%d.%d.%d' % sys.version_info[:3],
                  'cpu_s': {w: statistics.median(t) for w, t in cpu.items()}}))
"""


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


def in_images(images: list[str], runs: int, as_json: bool) -> int:
    """The probe in a container of each image: installed, from the archive, as a built image runs it."""
    from envpin.environment.payload import payload

    load = Path("/proc/loadavg").read_text().split()[:3]
    rows = []
    with tempfile.TemporaryDirectory(prefix="envpin-bench-probe-") as tmp:
        (Path(tmp) / "envpin.pyz").write_bytes(payload())
        (Path(tmp) / "driver.py").write_text(_IN_IMAGE)
        for image in images:
            proc = subprocess.run(
                [
                    "docker",
                    "run",
                    "--rm",
                    "-v",
                    f"{tmp}:/work:ro",
                    "--entrypoint",
                    "python3",
                    image,
                    "/work/driver.py",
                    str(runs),
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            if proc.returncode != 0:
                sys.stderr.write(f"{image}: {proc.stderr[-2000:]}\n")
                return 2
            got = json.loads(proc.stdout.strip().splitlines()[-1])
            cpu = got["cpu_s"]
            rows.append(
                {
                    "image": image,
                    "python": got["python"],
                    "cpu_s": {k: round(v, 4) for k, v in cpu.items()},
                    "image_vs_installed": round(cpu["image"] / cpu["installed"], 2),
                    "archive_vs_installed": round(cpu["archive"] / cpu["installed"], 2),
                }
            )
    met = all(r["image_vs_installed"] <= GOAL_IN_IMAGE for r in rows)
    if as_json:
        print(
            json.dumps(
                {"runs": runs, "load_average": load, "goal": GOAL_IN_IMAGE, "met": met, "images": rows},
                indent=2,
                sort_keys=True,
            )
        )
        return 0 if met else 1
    print(f"probe CPU inside each stand-in (median of {runs}, alternating; load average {' '.join(load)})")
    print(
        f"{'image':<50} {'python':>7} {'installed':>10} {'archive':>9} {'image':>9} {'image/inst':>11} "
        f"{'archive/inst':>13}"
    )
    for r in rows:
        c = r["cpu_s"]
        print(
            f"{r['image']:<50} {r['python']:>7} {c['installed']:>9.3f}s {c['archive']:>8.3f}s {c['image']:>8.3f}s "
            f"{r['image_vs_installed']:>10.2f}x {r['archive_vs_installed']:>12.2f}x"
        )
    print(f"goal: image <= {GOAL_IN_IMAGE}x installed in every image: {'met' if met else 'NOT met'}")
    return 0 if met else 1


_NCCL_CONF = "".join(
    f"{line}\n"
    for line in (
        "# written by bench_probe.py",
        "NCCL_ALGO=Ring",
        "NCCL_PROTO=Simple",
        "NCCL_NVLS_ENABLE=0",
        "NCCL_MIN_NCHANNELS=4",
        "NCCL_MAX_NCHANNELS=4",
        "NCCL_BUFFSIZE=4194304",
        "NCCL_SOCKET_IFNAME==eth0",
        "NCCL_IB_HCA=mlx5_0",
        "NCCL_DEBUG=WARN",
        "NCCL_P2P_DISABLE=0",
        "NCCL_SHM_DISABLE=0",
        "NCCL_IB_DISABLE=1",
    )
)


def _distributed_env(tmp: Path) -> dict[str, str]:
    """The distributed inputs the probe can read on a machine without GPUs or NCCL: configuration files, a
    topology file, NCCL and TensorFlow cluster variables."""
    home = tmp / "home"
    home.mkdir()
    (home / ".nccl.conf").write_text(_NCCL_CONF)
    (tmp / "job.conf").write_text(f"NCCL_ALGO=Tree\nNCCL_GRAPH_FILE={tmp / 'graph.xml'}\n")
    (tmp / "graph.xml").write_text('<graphs version="1"><graph id="0" pattern="4" nchannels="2"/></graphs>\n')
    (tmp / "topo.xml").write_text('<system version="1"><cpu numaid="0" arch="x86_64"/></system>\n')
    return {
        "HOME": str(home),
        "NCCL_CONF_FILE": str(tmp / "job.conf"),
        "NCCL_TOPO_FILE": str(tmp / "topo.xml"),
        "NCCL_ALGO": "Ring",
        "TF_CONFIG": json.dumps(
            {
                "cluster": {"worker": ["w0:2222", "w1:2222"], "chief": ["c0:2222"]},
                "task": {"type": "worker", "index": 1},
            }
        ),
        "CUDA_VISIBLE_DEVICES": "0",
    }


def _collector_times(env: dict[str, str], runs: int) -> dict[str, float]:
    """CPU milliseconds of this checkout's collectors in this process (median of `runs` probes, each on a
    fresh context, as envpin.probe.report.collect runs them): all of them, and the distributed section's."""
    from envpin.probe._common import Context
    from envpin.probe.report import COLLECTORS

    total: list[float] = []
    mine: list[float] = []
    for _ in range(runs):
        ctx = Context(environ=env)
        spent = {}
        for name, fn in COLLECTORS:
            start = time.process_time()
            fn(ctx)
            spent[name] = time.process_time() - start
        total.append(sum(spent.values()) * 1000)
        mine.append(spent["distributed"] * 1000)
    return {"all": round(statistics.median(total), 2), "distributed": round(statistics.median(mine), 2)}


def against(baseline: Path, runs: int, as_json: bool) -> int:
    """This checkout's probe against DIR's, alternating, CPU time of each probe process, bare and with the
    distributed inputs planted."""
    import resource

    if not (baseline / "envpin" / "probe" / "__main__.py").is_file():
        sys.stderr.write(f"{baseline} holds no envpin/probe to compare with\n")
        return 2
    load = Path("/proc/loadavg").read_text().split()[:3]
    cmd = [
        sys.executable,
        "-I",
        "-c",
        "import sys; sys.path.insert(0, sys.argv.pop(1)); import runpy; "
        "runpy.run_module('envpin.probe', run_name='__main__', alter_sys=True)",
    ]
    rows = {}
    with tempfile.TemporaryDirectory(prefix="envpin-bench-against-") as tmp:
        settings = {"bare": {}, "distributed": _distributed_env(Path(tmp))}
        for setting, extra in settings.items():
            env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **extra}
            cpu: dict[str, list[float]] = {"this": [], "baseline": []}
            fields_seen = {}
            for i in range(runs + 1):
                for who, repo in (("this", REPO), ("baseline", baseline)):
                    out = Path(tmp) / f"{who}.json"
                    before = resource.getrusage(resource.RUSAGE_CHILDREN)
                    subprocess.run(
                        [*cmd, str(repo), "--no-selftest", "--json", str(out)],
                        env=env,
                        check=True,
                        stdout=subprocess.DEVNULL,
                        cwd=tmp,
                    )
                    after = resource.getrusage(resource.RUSAGE_CHILDREN)
                    if i:  # the first round warms the file cache
                        cpu[who].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
                    else:
                        fields_seen[who] = probe_fields(json.loads(out.read_text()))
            med = {who: statistics.median(times) for who, times in cpu.items()}
            rows[setting] = {
                "cpu_s": {who: round(v, 4) for who, v in med.items()},
                "ratio": round(med["this"] / med["baseline"], 3),
                "fields": fields_seen,
                "collectors_ms": _collector_times(env, runs),
            }
    met = all(r["ratio"] <= GOAL_AGAINST for r in rows.values())
    if as_json:
        doc = {"runs": runs, "load_average": load, "goal": GOAL_AGAINST, "met": met, "settings": rows}
        print(json.dumps(doc, indent=2, sort_keys=True))
        return 0 if met else 1
    print(f"probe CPU, this checkout against {baseline} (median of {runs}, alternating; load average {' '.join(load)})")
    print(f"{'setting':<12} {'this':>9} {'baseline':>9} {'ratio':>7} {'fields':>13} {'collectors (distributed)':>26}")
    for setting, r in rows.items():
        c, f, k = r["cpu_s"], r["fields"], r["collectors_ms"]
        print(
            f"{setting:<12} {c['this']:8.4f}s {c['baseline']:8.4f}s {r['ratio']:6.3f}x "
            f"{f['this']:>6}/{f['baseline']:<6} {k['all']:>12.2f} ms ({k['distributed']:.2f} ms)"
        )
    print(f"goal: this <= {GOAL_AGAINST}x the baseline in both settings: {'met' if met else 'NOT met'}")
    return 0 if met else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=9, help="measured runs of each command (default 9)")
    ap.add_argument("--json", action="store_true", help="print the results as JSON on stdout")
    ap.add_argument("--images", action="store_true", help="the probe inside containers of the stand-in images")
    ap.add_argument("--image", action="append", help="with --images: this image instead of the stand-ins")
    ap.add_argument("--against", type=Path, help="compare with the probe of this earlier envpin copy (a folder)")
    args = ap.parse_args()
    if args.against is not None:
        return against(args.against, args.runs, args.json)
    if args.images:
        return in_images(args.image or list(STAND_INS), args.runs, args.json)

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
        "probe": {
            "median_s": round(mp, 4),
            "min_s": round(min(probe_times), 4),
            "max_s": round(max(probe_times), 4),
            "fields": n_probe,
        },
        "collect_env": {
            "median_s": round(mt, 4),
            "min_s": round(min(torch_times), 4),
            "max_s": round(max(torch_times), 4),
            "fields": n_torch,
        },
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
