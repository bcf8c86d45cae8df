"""Benchmark: `envpin fleet probe --slurm` against the Slurm test cluster, beside Slurm's own floor.

    .venv/bin/python benchmarks/bench_fleet_slurm.py [--runs 7] [--bringup] [--selftest] [--json]

Measured: wall time of the whole command in a fresh process (sinfo, salloc, srun with the 0.3 MB probe
archive broadcast to every node, the probes, scancel, the reports written), after one unmeasured warm-up;
beside it `srun --nodes=N hostname`, the least a scheduler round trip to every node costs. With
--bringup, also `scripts/slurm.sh down` then `up` (destroys the running cluster; the image is re-imported
from the cached rootfs). With --selftest, also `envpin fleet selftest --slurm --nodes 2` with the nodes'
TensorFlow (/opt/envpin-tf), the same number of runs. Needs the cluster (bash scripts/slurm.sh up) and root.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONF = Path(os.environ.get("ENVPIN_SLURM_CONF", "/run/envpin-test/slurm/conf/slurm.conf"))


def _timed(cmd: list[str], cwd: str) -> float:
    env = {**os.environ, "SLURM_CONF": str(CONF)}
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    took = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd[:4])} failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    return took


def _stats(times: list[float]) -> dict[str, float]:
    return {
        "median_s": round(statistics.median(times), 3),
        "min_s": round(min(times), 3),
        "max_s": round(max(times), 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--bringup", action="store_true", help="also time scripts/slurm.sh down + up")
    ap.add_argument("--selftest", action="store_true", help="also time fleet selftest --slurm --nodes 2")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    figures: dict[str, object] = {}
    if args.bringup:
        subprocess.run(["bash", str(REPO / "scripts" / "slurm.sh"), "down"], check=True, capture_output=True)
        start = time.perf_counter()
        subprocess.run(["bash", str(REPO / "scripts" / "slurm.sh"), "up"], check=True, capture_output=True)
        figures["bringup_s"] = round(time.perf_counter() - start, 2)

    sinfo = subprocess.run(
        ["sinfo", "-h", "-N", "-o", "%N"],
        env={**os.environ, "SLURM_CONF": str(CONF)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    nodes = len(set(sinfo))
    envpin = str(Path(sys.executable).with_name("envpin"))
    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as tmp:
        probe = [envpin, "fleet", "probe", "--slurm", "--out", str(Path(tmp) / "fleet")]
        floor = ["srun", f"--nodes={nodes}", "--ntasks-per-node=1", "hostname"]
        _timed(probe, tmp)
        _timed(floor, tmp)
        fleet, srun, selftest = [], [], []
        for _ in range(args.runs):
            fleet.append(_timed(probe, tmp))
            srun.append(_timed(floor, tmp))
        if args.selftest:
            mwms = [envpin, "fleet", "selftest", "--slurm", "--nodes", "2", "--python", "/opt/envpin-tf/bin/python"]
            mwms += ["--out", str(Path(tmp) / "selftest")]
            selftest = [_timed(mwms, tmp) for _ in range(args.runs)]
    figures.update({"nodes": nodes, "runs": args.runs, "fleet_probe": _stats(fleet), "srun_hostname": _stats(srun)})
    if selftest:
        figures["fleet_selftest_2_nodes"] = _stats(selftest)
    if args.json:
        print(json.dumps(figures, indent=2, sort_keys=True))
        return
    if "bringup_s" in figures:
        print(f"scripts/slurm.sh up (after down, rootfs cached): {figures['bringup_s']} s")
    print(
        f"envpin fleet probe --slurm, {nodes} nodes, {args.runs} runs: median {figures['fleet_probe']['median_s']} s "
        f"(min {figures['fleet_probe']['min_s']}, max {figures['fleet_probe']['max_s']})"
    )
    print(f"srun --nodes={nodes} hostname (the scheduler's floor): median {figures['srun_hostname']['median_s']} s")
    if selftest:
        st = figures["fleet_selftest_2_nodes"]
        assert isinstance(st, dict)
        print(f"envpin fleet selftest --slurm --nodes 2: median {st['median_s']} s", end=" ")
        print(f"(min {st['min_s']}, max {st['max_s']})")


if __name__ == "__main__":
    main()
