"""Build benchmark: cold build, no-op rebuild, and what envpin adds on top of the base image.

Run on a machine where `bash scripts/services.sh all` has started the engine and the local registry:

    .venv/bin/python benchmarks/bench_build.py [--runs 5] [--image 127.0.0.1:5000/nvidia/tensorflow:20.02-tf2-py3]

Goals: no-op rebuild under 2 s; envpin's own layers under 1 MB (no user packages in this run).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _envpin(*args: str) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "envpin", *args], capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"envpin {' '.join(args)} failed:\n{proc.stderr}")
    return elapsed, proc.stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--image", default="127.0.0.1:5000/nvidia/tensorflow:20.02-tf2-py3")
    opts = ap.parse_args()
    import docker

    client = docker.from_env()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "env"
        base = ["build", "--ngc", "20.02-tf2-py3", "--base-image", opts.image, "--out", str(out)]
        cold = [_envpin(*base, "--no-cache")[0] for _ in range(opts.runs)]
        noop = []
        tag = ""
        for _ in range(opts.runs):
            seconds, tag = _envpin(*base)
            noop.append(seconds)
        image = client.images.get(tag)
        base_image = client.images.get(opts.image)
        base_layers = set(base_image.attrs["RootFS"]["Layers"])
        added = [layer for layer in image.attrs["RootFS"]["Layers"] if layer not in base_layers]
        added_bytes = image.attrs["Size"] - base_image.attrs["Size"]
    print(f"envpin build benchmark ({opts.runs} runs each, base {opts.image})")
    print(
        f"  cold build (--no-cache): median {statistics.median(cold):.2f} s  (min {min(cold):.2f}, max {max(cold):.2f})"
    )
    print(
        f"  no-op rebuild:           median {statistics.median(noop):.2f} s  (min {min(noop):.2f}, max {max(noop):.2f})"
    )
    print(f"  goal no-op < 2 s: {'met' if statistics.median(noop) < 2 else 'NOT met'}")
    print(f"  layers added over the base: {len(added)}")
    print(
        f"  bytes added over the base:  {added_bytes} ({added_bytes / 1e6:.3f} MB); goal < 1 MB: "
        f"{'met' if added_bytes < 1_000_000 else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
