"""Benchmark: `envpin diff` as a table against its own JSON output, on reports with many differences.

    .venv/bin/python benchmarks/bench_diff.py [--runs 5] [--keys 10000] [--json]

Two report pairs are made from a real probe of this machine: one with `--keys` extra environment variables
that all differ, one with a single 4 MB value on each side. Each case runs the installed `envpin` console
script as a fresh process, text and `--json` alternating after a warm-up. Goal: the text output of the
10k-key pair under 1 s median and within 1.5x of its JSON.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL_S, GOAL_RATIO = 1.0, 1.5


def _envpin() -> list[str]:
    script = Path(sys.executable).with_name("envpin")
    return [str(script)] if script.exists() else [shutil.which("envpin") or "envpin"]


def pairs(folder: Path, keys: int) -> dict[str, tuple[Path, Path]]:
    base = json.loads(
        subprocess.run(
            [sys.executable, "-m", "envpin.probe", "--no-selftest", "--json", "-"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    out: dict[str, tuple[Path, Path]] = {}
    a, b = json.loads(json.dumps(base)), json.loads(json.dumps(base))
    for i in range(keys):
        a["env"][f"TF_BENCH_{i}"] = {"value": str(i), "source": "environ:bench"}
        b["env"][f"TF_BENCH_{i}"] = {"value": str(i + 1), "source": "environ:bench"}
    out[f"{keys} differing keys"] = (folder / "a.json", folder / "b.json")
    c, d = json.loads(json.dumps(base)), json.loads(json.dumps(base))
    c["env"]["TF_BENCH_BIG"] = {"value": "x" * 4_000_000, "source": "environ:bench"}
    d["env"]["TF_BENCH_BIG"] = {"value": "y" * 4_000_000, "source": "environ:bench"}
    out["one 4 MB value"] = (folder / "c.json", folder / "d.json")
    for (left, right), (pa, pb) in zip(((a, b), (c, d)), out.values(), strict=True):
        pa.write_text(json.dumps(left))
        pb.write_text(json.dumps(right))
    return out


def measure(cases: dict[str, tuple[Path, Path]], runs: int) -> dict[str, dict[str, list[float]]]:
    times: dict[str, dict[str, list[float]]] = {}
    for name, (a, b) in cases.items():
        text = [*_envpin(), "diff", str(a), str(b)]
        variants = {"text": text, "json": [*text, "--json"]}
        times[name] = {k: [] for k in variants}
        for cmd in variants.values():
            subprocess.run(cmd, capture_output=True)  # warm-up
        for _ in range(runs):
            for kind, cmd in variants.items():
                started = time.perf_counter()
                subprocess.run(cmd, capture_output=True)
                times[name][kind].append(time.perf_counter() - started)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        times = measure(pairs(Path(tmp), args.keys), args.runs)
    summary = {
        name: {kind: round(statistics.median(v), 3) for kind, v in kinds.items()} for name, kinds in times.items()
    }
    for fig in summary.values():
        fig["ratio"] = round(fig["text"] / fig["json"], 2)
    if args.json:
        print(json.dumps(summary, indent=2, sort_keys=True))
        return 0
    for name, fig in summary.items():
        met = fig["text"] < GOAL_S and fig["ratio"] <= GOAL_RATIO
        print(
            f"{name:>22}: text {fig['text']:.3f} s, json {fig['json']:.3f} s, ratio {fig['ratio']:.2f} "
            f"({'met' if met else 'NOT met'}: text < {GOAL_S} s, ratio <= {GOAL_RATIO})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
