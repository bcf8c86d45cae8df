"""Evidence benchmark: `envpin sbom` (CycloneDX and SPDX) and `envpin attest sign`/`verify` against the in-image
probe alone, on the same envpin image.

Run on a machine where `bash scripts/services.sh all` has started the engine and the local registry:

    .venv/bin/python benchmarks/bench_evidence.py [--runs 5] [--image 127.0.0.1:5000/nvidia/tensorflow:20.02-tf2-py3]

The probe alone is `envpin probe --image TAG --no-selftest` (one throwaway container running the probe);
`envpin sbom` runs one throwaway container for its in-image reading and builds the document on the host.
Goal (issue 40): SBOM and provenance for an image (`sbom` then `attest sign`) in under 2x the time of the
in-image probe alone. The build state, caches and keys go to a scratch folder, never the user's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _envpin(env: dict[str, str], *args: str) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "envpin", *args], capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"envpin {' '.join(args)} failed:\n{proc.stderr}")
    return elapsed, proc.stdout.strip()


def _line(name: str, times: list[float], against: float | None = None) -> str:
    median = statistics.median(times)
    ratio = f"  {median / against:.2f}x the probe" if against else ""
    return f"  {name:<34} median {median:.2f} s  (min {min(times):.2f}, max {max(times):.2f}){ratio}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--image", default="127.0.0.1:5000/nvidia/tensorflow:20.02-tf2-py3")
    opts = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "ENVPIN_STATE_DIR": f"{tmp}/state", "XDG_CACHE_HOME": f"{tmp}/cache"}
        out = Path(tmp) / "env"
        _, tag = _envpin(env, "build", "--ngc", "20.02-tf2-py3", "--base-image", opts.image, "--out", str(out))
        probe = [
            _envpin(env, "probe", "--image", tag, "--no-selftest", "--gpus", "none", "--out", f"{tmp}/r{i}")[0]
            for i in range(opts.runs)
        ]
        cdx = [_envpin(env, "sbom", "--lock", str(out), "-o", f"{tmp}/s.cdx.json")[0] for _ in range(opts.runs)]
        spdx = [
            _envpin(env, "sbom", "--lock", str(out), "--format", "spdx", "-o", f"{tmp}/s.spdx.json")[0]
            for _ in range(opts.runs)
        ]
        key = f"{tmp}/key.pem"
        _envpin(env, "attest", "keygen", key)
        sign = [
            _envpin(env, "attest", "sign", "--key", key, "--lock", str(out), "-o", f"{tmp}/p.dsse.json")[0]
            for _ in range(opts.runs)
        ]
        verify = [
            _envpin(env, "attest", "verify", "--key", f"{key}.pub", "--lock", str(out), f"{tmp}/p.dsse.json")[0]
            for _ in range(opts.runs)
        ]
    base = statistics.median(probe)
    print(f"envpin evidence benchmark ({opts.runs} runs each, image {tag} built from {opts.image})")
    print(_line("probe --image --no-selftest", probe))
    print(_line("sbom (CycloneDX 1.6)", cdx, base))
    print(_line("sbom --format spdx (SPDX 2.3)", spdx, base))
    print(_line("attest sign", sign, base))
    print(_line("attest verify", verify, base))
    # An image's evidence: its SBOM (the slower format) and its signed provenance, one after the other.
    worst = (max(statistics.median(cdx), statistics.median(spdx)) + statistics.median(sign)) / base
    print(f"  goal: SBOM and provenance under 2x the probe alone: {'met' if worst < 2 else 'NOT met'} ({worst:.2f}x)")


if __name__ == "__main__":
    main()
