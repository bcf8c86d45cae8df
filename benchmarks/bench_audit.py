"""How `envpin audit` scales: 1k, 10k and 100k-line Dockerfiles, and a tree of 500 Dockerfiles.

    python benchmarks/bench_audit.py [--repeat N] [--json]

Each Dockerfile is generated from the same block of instructions a real one has (multi-stage FROMs, ARG/ENV
with substitutions, COPY of a requirements file audited from the build context, RUNs with continuations, pip,
apt, git and curl pipes, comments), repeated until the line count is reached, so every rule has work to do.
The audit runs in this process through `envpin.audit.run` (parse, rules, build context, suppressions); the
figure is the median wall time. Goals: time grows linearly with the size (the per-line cost of the 100k file is
within 2x of the 1k file's) and the 100k-line file takes under 3 s; the 500-file tree is reported beside the
single 1k file, per file.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

GOAL_100K_S = 3.0
GOAL_LINEAR_RATIO = 2.0

HEADER = ("# syntax=docker/dockerfile:1\n"
          "ARG BASE=nvcr.io/nvidia/tensorflow:20.02-tf2-py3\n")
#: One block of a realistic Dockerfile (22 lines); {n} keeps stage names unique.
BLOCK = """FROM ${{BASE}} AS stage{n}
ENV TF_DETERMINISTIC_OPS=1 PYTHONHASHSEED=0 APP=/opt/app{n}
WORKDIR ${{APP}}
COPY requirements.txt ./
RUN pip install --no-cache-dir -r requirements.txt && \\
    pip install numpy==1.26.4 requests "flask>=2" && \\
    python -c "import numpy"
RUN apt-get update && \\
    apt-get install -y --no-install-recommends curl git=1:2.39.2-1 && \\
    rm -rf /var/lib/apt/lists/*
# envpin: ignore=curl-pipe-shell
RUN curl -fsSL https://example.com/install.sh | sh
RUN git clone --depth 1 https://github.com/example/repo.git /src/repo{n} && \\
    git -C /src/repo{n} checkout 0123456789abcdef0123456789abcdef01234567
ARG VERSION=1.{n}
LABEL org.example.version=${{VERSION}}
ADD https://example.com/data-{n}.tar.gz /data/
RUN echo `date` $((1+{n})) > /build-info && \\
    for i in 1 2 3; do echo $i; done
ENV TF_XLA_FLAGS="--tf_xla_auto_jit=2"
EXPOSE 8888
USER 1000
"""
REQUIREMENTS = "numpy==1.26.4\nrequests>=2\n--extra-index-url https://idx.example\n"


def dockerfile(lines: int) -> str:
    out, n = [HEADER], 0
    total = HEADER.count("\n")
    while total < lines:
        block = BLOCK.format(n=n)
        out.append(block)
        total += block.count("\n")
        n += 1
    return "".join(out)


def timed(paths: list[str], repeat: int) -> tuple[float, int]:
    from envpin.audit import run

    times, findings = [], 0
    for _ in range(repeat):
        start = time.perf_counter()
        result = run(paths, fail_on="error")
        times.append(time.perf_counter() - start)
        findings = len(result.findings)
    return statistics.median(times), findings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        cwd = os.getcwd()
        os.chdir(root)
        try:
            (root / "requirements.txt").write_text(REQUIREMENTS)
            for size in (1_000, 10_000, 100_000):
                path = root / f"Dockerfile.{size}"
                text = dockerfile(size)
                path.write_text(text)
                seconds, found = timed([path.name], args.repeat)
                rows.append({"case": f"{size:,}-line Dockerfile", "lines": text.count("\n"), "files": 1,
                             "seconds": round(seconds, 3), "findings": found,
                             "us_per_line": round(seconds / text.count("\n") * 1e6, 1)})
            tree = root / "tree"
            paths = []
            for i in range(500):
                folder = tree / f"svc{i:03d}"
                folder.mkdir(parents=True)
                (folder / "requirements.txt").write_text(REQUIREMENTS)
                (folder / "Dockerfile").write_text(dockerfile(60))
                paths.append(str((folder / "Dockerfile").relative_to(root)))
            seconds, found = timed(paths, args.repeat)
            lines = sum((root / p).read_text().count("\n") for p in paths)
            rows.append({"case": "500-file tree", "lines": lines, "files": 500, "seconds": round(seconds, 3),
                         "findings": found, "us_per_line": round(seconds / lines * 1e6, 1)})
        finally:
            os.chdir(cwd)
    small, large = rows[0]["us_per_line"], rows[2]["us_per_line"]
    verdict = {
        "100k_under_3s": rows[2]["seconds"] < GOAL_100K_S,
        "linear": large <= small * GOAL_LINEAR_RATIO,
        "per_line_ratio_100k_vs_1k": round(large / small, 2),
    }
    if args.json:
        print(json.dumps({"machine": platform.machine(), "cpus": os.cpu_count(), "rows": rows, "goals": verdict},
                         indent=2))
        return 0
    print(f"{os.cpu_count()} CPUs, Python {platform.python_version()}, median of {args.repeat}")
    for r in rows:
        print(f"{r['case']:<24} {r['lines']:>7} lines {r['files']:>4} files {r['seconds']:>8.3f} s "
              f"{r['us_per_line']:>7.1f} us/line {r['findings']:>6} findings")
    print(f"per-line cost 100k vs 1k: {verdict['per_line_ratio_100k_vs_1k']}x "
          f"({'linear' if verdict['linear'] else 'NOT linear'}, goal <= {GOAL_LINEAR_RATIO}x); "
          f"100k-line file {'under' if verdict['100k_under_3s'] else 'OVER'} {GOAL_100K_S} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
