"""How `envpin audit` scales: 1k, 10k and 100k-line Dockerfiles, a tree of 500 Dockerfiles, a 100k-line Dockerfile
of one stage, and single RUN lines of 10 MB (--memory).

    python benchmarks/bench_audit.py [--repeat N] [--json]
    python benchmarks/bench_audit.py --memory [--mb 10] [--shape NAME ...] [--repeat N] [--json]

Each Dockerfile is generated from the same block of instructions a real one has (multi-stage FROMs, ARG/ENV
with substitutions, COPY of a requirements file audited from the build context, RUNs with continuations, pip,
apt, git and curl pipes, comments), repeated until the line count is reached, so every rule has work to do.
The audit runs in this process through `envpin.audit.run` (parse, rules, build context, suppressions); the
figure is the median wall time. The 100k-line file is also audited as a user runs it, `envpin audit FILE
--format tty|json|sarif` in a fresh process with the output going into a pipe (the formats alternating run
by run; wall and CPU time). A fixed pure-Python loop is timed last: this machine's speed drifts from minute to
minute, and that figure says at which speed the others were taken.
Goals: json and sarif output cost at most 1.2x the CPU of tty on the 100k-line file; time grows linearly
with the size (the per-line cost of the 100k files is
within 2x of the 1k file's) and the 100k-line file takes under 3 s; the 500-file tree is reported beside the
single 1k file, per file. The one-stage file has the same blocks without their FROM lines, so every RUN looks
back over one long stage for the COPY of its requirements file.

--memory audits Dockerfiles whose one RUN instruction is --mb megabytes long, each shape in a fresh interpreter
(`envpin.audit.run`, as the CLI calls it, without rendering the output), and prints that process's peak
resident set (ru_maxrss), the peak less the same process auditing a two-line Dockerfile (the interpreter and
envpin's imports), both as a multiple of the input size, the audit's wall time and its findings (the
median of --repeat runs). Every shape ends in a hazard, so the long line must still yield its finding. Goal:
the peak stays under 200 MB for a 10 MB line.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

GOAL_100K_S = 3.0
GOAL_LINEAR_RATIO = 2.0
GOAL_PEAK_MB = 200.0
#: The machine-readable outputs of the 100k-line file cost at most this much CPU against the text (tty) path.
GOAL_OUTPUT_RATIO = 1.2
OUTPUTS = ("tty", "json", "sarif")

HEADER = "# syntax=docker/dockerfile:1\nARG BASE=nvcr.io/nvidia/tensorflow:20.02-tf2-py3\n"
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


def dockerfile(lines: int, single_stage: bool = False) -> str:
    """The block repeated to `lines` lines; single_stage: one FROM at the top and the blocks without theirs, so
    every RUN belongs to one long stage (what the build context and stage lookups see as one long list)."""
    out, n = [HEADER + ("FROM ${BASE}\n" if single_stage else "")], 0
    total = out[0].count("\n")
    while total < lines:
        block = BLOCK.format(n=n)
        if single_stage:
            block = block.split("\n", 1)[1]
        out.append(block)
        total += block.count("\n")
        n += 1
    return "".join(out)


#: The long-line shapes: (what the line holds, the unit repeated to fill it, (head, tail) around the repeats).
#: The first five are the ones the memory goal names; the others are further shapes a long RUN line can have.
_FROM = "FROM nvcr.io/nvidia/tensorflow:22.03-tf2-py3\nENV TF_DETERMINISTIC_OPS=1 PYTHONHASHSEED=0\n"
SHAPES: dict[str, tuple[str, str, tuple[str, str]]] = {
    "words": (
        "`echo a b c ...`: millions of one-letter words",
        "a b c d e f g h ",
        ("RUN echo ", "&& pip install flask\n"),
    ),
    "one-word": (
        "`echo aaaa...`: one word of the whole size",
        "a",
        ("RUN echo ", " && curl -fsSL https://example.com/i.sh | sh\n"),
    ),
    "vars": (
        "`echo $V ${V} ...`: millions of substitutions",
        "$V ${V} ",
        ("ARG V=value\nRUN echo ", "&& apt-get install -y curl\n"),
    ),
    "commands": (
        "`echo a && echo a && ...`: a million commands",
        "echo a && ",
        ("RUN ", "git clone https://github.com/x/y.git\n"),
    ),
    "continuation": (
        "`echo word \\` on a million continuation lines",
        "word \\\n    ",
        ("RUN echo ", "&& pip install flask\n"),
    ),
    "quoted": ('`echo "a b" "a b" ...`: quoted words', '"a b" ', ("RUN echo ", "&& pip install flask\n")),
    "sh-c": (
        '`sh -c "echo a && ..."`: a million commands inside one word',
        "echo a && ",
        ('RUN sh -c "', 'pip install flask"\n'),
    ),
    "heredoc": ("`RUN <<EOF` with 1.5 million body lines", "echo a\n", ("RUN <<EOF\n", "pip install flask\nEOF\n")),
    "substitutions": (
        "`echo $(echo a) ...`: a million command substitutions",
        "$(echo a) ",
        ("RUN echo ", "&& pip install flask\n"),
    ),
}
#: What the child process runs: the audit of one file, then its own peak resident set.
_CHILD = """import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
from envpin.audit import run
start = time.perf_counter()
result = run([sys.argv[2]], fail_on="error")
seconds = time.perf_counter() - start
print(json.dumps({"maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "seconds": seconds,
                  "findings": sorted(f"{f.line}:{f.rule}" for f in result.findings)}))
"""


def long_line(shape: str, size: int) -> str:
    """A Dockerfile whose RUN instruction is `size` bytes of the shape's unit, between its head and tail."""
    _what, unit, (head, tail) = SHAPES[shape]
    return _FROM + head + unit * (size // len(unit)) + tail


def child(path: Path) -> tuple[int, float, list[str]]:
    """(peak resident set in KB, audit seconds, findings as LINE:RULE) of a fresh process auditing `path`."""
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(REPO), path.name],
        cwd=path.parent,
        check=True,
        capture_output=True,
        text=True,
    )
    doc = json.loads(out.stdout)
    return int(doc["maxrss_kb"]), float(doc["seconds"]), list(doc["findings"])


def memory(shapes: list[str], megabytes: float, repeat: int, as_json: bool) -> int:
    size = int(megabytes * 1024 * 1024)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        base_path = Path(tmp) / "Dockerfile.base"
        base_path.write_text(_FROM)
        base_mb = statistics.median(child(base_path)[0] for _ in range(repeat)) / 1024
        for shape in shapes:
            path = Path(tmp) / f"Dockerfile.{shape}"
            text = long_line(shape, size)
            path.write_text(text)
            runs = [child(path) for _ in range(repeat)]
            peak_mb = statistics.median(r[0] for r in runs) / 1024
            input_mb = len(text.encode()) / 2**20
            rows.append(
                {
                    "shape": shape,
                    "what": SHAPES[shape][0],
                    "input_mb": round(input_mb, 1),
                    "peak_mb": round(peak_mb, 1),
                    "peak_ratio": round(peak_mb / input_mb, 1),
                    "net_mb": round(peak_mb - base_mb, 1),
                    "net_ratio": round((peak_mb - base_mb) / input_mb, 1),
                    "seconds": round(statistics.median(r[1] for r in runs), 2),
                    "findings": runs[0][2],
                    "under_goal": peak_mb < GOAL_PEAK_MB,
                }
            )
    if as_json:
        print(
            json.dumps(
                {
                    "machine": platform.machine(),
                    "cpus": os.cpu_count(),
                    "baseline_mb": round(base_mb, 1),
                    "repeat": repeat,
                    "size_mb": megabytes,
                    "goal_peak_mb_for_10mb": GOAL_PEAK_MB,
                    "rows": rows,
                },
                indent=2,
            )
        )
        return 0
    print(
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}, median of {repeat}, a fresh process per run; "
        f"baseline (two-line Dockerfile) {base_mb:.1f} MB; goal for a 10 MB line: peak under {GOAL_PEAK_MB:.0f} MB"
    )
    print(f"{'shape':<14} {'input':>8} {'peak RSS':>9} {'x input':>8} {'net':>8} {'x input':>8} {'time':>8}  findings")
    for r in rows:
        print(
            f"{r['shape']:<14} {r['input_mb']:>6.1f}MB {r['peak_mb']:>7.1f}MB {r['peak_ratio']:>7.1f}x "
            f"{r['net_mb']:>6.1f}MB {r['net_ratio']:>7.1f}x {r['seconds']:>7.2f}s  {' '.join(r['findings'])}"
            f"{'' if r['under_goal'] else '  (over the goal)'}"
        )
    return 0


def timed(paths: list[str], repeat: int) -> tuple[float, int]:
    from envpin.audit import run

    times, findings = [], 0
    for _ in range(repeat):
        start = time.perf_counter()
        result = run(paths, fail_on="error")
        times.append(time.perf_counter() - start)
        findings = len(result.findings)
    return statistics.median(times), findings


def cli_timed(path: str, fmt: str, repeat: int) -> tuple[float, float]:
    """`envpin audit PATH --format FMT` as a user runs it (start-up, audit, output into a pipe): median wall
    time and median CPU time of the process (getrusage of the children: steadier on a shared machine)."""
    import resource

    script = Path(sys.executable).with_name("envpin")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "envpin"]
    times, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run([*cmd, "audit", path, "--format", fmt], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return statistics.median(times), statistics.median(cpus)


def reference_seconds(repeat: int) -> float:
    """A fixed pure-Python loop, timed beside the audit: machines of one kind (and one machine from minute to
    minute) differ in speed, so the audit's figures are read against this one."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        sum(i * i for i in range(5_000_000))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--memory", action="store_true", help="peak memory of single long RUN lines")
    parser.add_argument("--mb", type=float, default=10.0, help="--memory: size of the long line in MB")
    parser.add_argument("--shape", action="append", choices=sorted(SHAPES), help="--memory: only these shapes")
    args = parser.parse_args()
    if args.memory:
        return memory(args.shape or list(SHAPES), args.mb, args.repeat, args.json)
    rows = []
    cli_wall: dict[str, list[float]] = {}
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
                rows.append(
                    {
                        "case": f"{size:,}-line Dockerfile",
                        "lines": text.count("\n"),
                        "files": 1,
                        "seconds": round(seconds, 3),
                        "findings": found,
                        "us_per_line": round(seconds / text.count("\n") * 1e6, 1),
                    }
                )
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
            rows.append(
                {
                    "case": "500-file tree",
                    "lines": lines,
                    "files": 500,
                    "seconds": round(seconds, 3),
                    "findings": found,
                    "us_per_line": round(seconds / lines * 1e6, 1),
                }
            )
            cli_cpu: dict[str, list[float]] = {fmt: [] for fmt in OUTPUTS}
            cli_wall: dict[str, list[float]] = {}
            for _ in range(args.repeat):  # the formats alternate run by run: each sees the same machine
                for fmt in OUTPUTS:
                    seconds, cpu = cli_timed("Dockerfile.100000", fmt, 1)
                    cli_cpu[fmt].append(cpu)
                    cli_wall.setdefault(fmt, []).append(seconds)
            for fmt in OUTPUTS:
                seconds, cpu = statistics.median(cli_wall[fmt]), statistics.median(cli_cpu[fmt])
                rows.append(
                    {
                        "case": f"CLI, 100k lines, {fmt}",
                        "lines": rows[2]["lines"],
                        "files": 1,
                        "seconds": round(seconds, 3),
                        "cpu_seconds": round(cpu, 3),
                        "findings": rows[2]["findings"],
                        "us_per_line": round(seconds / rows[2]["lines"] * 1e6, 1),
                    }
                )
            path = root / "Dockerfile.single"
            text = dockerfile(100_000, single_stage=True)
            path.write_text(text)
            seconds, found = timed([path.name], args.repeat)
            rows.append(
                {
                    "case": "100,000 lines, 1 stage",
                    "lines": text.count("\n"),
                    "files": 1,
                    "seconds": round(seconds, 3),
                    "findings": found,
                    "us_per_line": round(seconds / text.count("\n") * 1e6, 1),
                }
            )
        finally:
            os.chdir(cwd)
    reference = reference_seconds(args.repeat)
    small, large, single = rows[0]["us_per_line"], rows[2]["us_per_line"], rows[-1]["us_per_line"]
    verdict = {
        "100k_under_3s": rows[2]["seconds"] < GOAL_100K_S,
        "cli_100k_under_3s": max(r["seconds"] for r in rows if r["case"].startswith("CLI")) < GOAL_100K_S,
        "reference_loop_s": round(reference, 3),
        "linear": max(large, single) <= small * GOAL_LINEAR_RATIO,
        "per_line_ratio_100k_vs_1k": round(large / small, 2),
        "per_line_ratio_single_stage_100k_vs_1k": round(single / small, 2),
    }
    cpu_of = {r["case"].rsplit(", ", 1)[1]: r["cpu_seconds"] for r in rows if r["case"].startswith("CLI")}
    for fmt in ("json", "sarif"):
        verdict[f"cli_{fmt}_vs_tty_cpu"] = round(cpu_of[fmt] / cpu_of["tty"], 2)
    verdict["outputs_within_goal"] = all(verdict[f"cli_{f}_vs_tty_cpu"] <= GOAL_OUTPUT_RATIO for f in ("json", "sarif"))
    if args.json:
        print(
            json.dumps(
                {"machine": platform.machine(), "cpus": os.cpu_count(), "rows": rows, "goals": verdict}, indent=2
            )
        )
        return 0
    print(
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}, median of {args.repeat}, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    for r in rows:
        print(
            f"{r['case']:<24} {r['lines']:>7} lines {r['files']:>4} files {r['seconds']:>8.3f} s "
            f"{r['us_per_line']:>7.1f} us/line {r['findings']:>6} findings"
        )
    print(
        f"per-line cost 100k vs 1k: {verdict['per_line_ratio_100k_vs_1k']}x, one stage "
        f"{verdict['per_line_ratio_single_stage_100k_vs_1k']}x "
        f"({'linear' if verdict['linear'] else 'NOT linear'}, goal <= {GOAL_LINEAR_RATIO}x); "
        f"100k-line file {'under' if verdict['100k_under_3s'] else 'OVER'} {GOAL_100K_S} s, through the CLI "
        f"{'under' if verdict['cli_100k_under_3s'] else 'OVER'}"
    )
    print(
        f"CLI on the 100k-line file, CPU: tty {cpu_of['tty']:.3f} s, json {cpu_of['json']:.3f} s "
        f"({verdict['cli_json_vs_tty_cpu']}x), sarif {cpu_of['sarif']:.3f} s ({verdict['cli_sarif_vs_tty_cpu']}x); "
        f"goal <= {GOAL_OUTPUT_RATIO}x: {'met' if verdict['outputs_within_goal'] else 'NOT met'}"
    )
    print(f"reference loop (sum of 5 million squares): {reference:.3f} s; compare figures taken at one speed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
