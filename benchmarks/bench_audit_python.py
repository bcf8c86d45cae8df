"""How `envpin audit` scales on Python training scripts: 1k, 10k and 100k-line scripts, side by side with
`ruff check` on the same files (for scale: a linter written in Rust that parses the same Python).

    python benchmarks/bench_audit_python.py [--repeat N] [--json]

Each script is generated from one block of a realistic training script (imports, a tf.data pipeline with a
parallel map, a Keras model with MaxPooling, compile and fit, a custom step with GradientTape, segment sums,
environment settings, seeds), repeated until the line count is reached with the names numbered, so every rule
has work to do. The audit runs in this process through `envpin.audit.run` (read, parse, every check,
suppressions) against TensorFlow 2.16 (`--tf`), the median of --repeat runs, as wall time and as this process's
CPU time (the goals are judged on CPU time: on a machine whose cores other work shares, wall time includes the
wait for a core); ruff runs as a user runs it
(`ruff check --isolated --no-cache FILE`, a fresh process). The reference loop of benchmarks/bench_audit.py is
timed too: this machine's speed drifts with its load, and that figure says at which speed the others were taken.
Goals: the 10k-line script under 0.5 s ("well
under a second"), and time linear in size (the per-line cost of the 100k-line script within 2x of the 1k's).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

GOAL_10K_S = 0.5
GOAL_LINEAR_RATIO = 2.0
SIZES = (1_000, 10_000, 100_000)

HEADER = '''"""A generated training script."""
import os
import random

import numpy as np
import tensorflow as tf
from tensorflow.keras import layers

'''
#: One block of a training script (40 lines); {n} keeps the names unique.
BLOCK = """

def augment_{n}(image, label):
    image = tf.image.random_flip_left_right(image)
    return tf.image.random_brightness(image, 0.1), label


def pool_{n}(data, ids, count):
    return tf.math.unsorted_segment_sum(data, ids, num_segments=count)


def build_{n}(classes={n}):
    inputs = tf.keras.Input((32, 32, 3))
    x = layers.Conv2D(16, 3, activation="relu")(inputs)
    x = layers.MaxPooling2D()(x)
    x = layers.Dropout(0.25)(layers.Flatten()(x))
    return tf.keras.Model(inputs, layers.Dense(classes)(x))


def train_{n}(files, epochs=2):
    os.environ["TF_XLA_FLAGS"] = "--tf_xla_auto_jit=2"
    data = tf.data.Dataset.from_tensor_slices(files).shuffle(100, seed={n})
    data = data.map(augment_{n}, num_parallel_calls=tf.data.AUTOTUNE, deterministic=False).batch(32)
    model = build_{n}()
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(data, epochs=epochs, workers=4, use_multiprocessing=True)
    optimizer = tf.keras.optimizers.SGD(0.01)
    for x, y in data:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, model(x)))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
    order = list(range({n} + 10))
    random.shuffle(order)
    return np.random.permutation(order)
"""


def script(lines: int) -> str:
    out, n = [HEADER], 0
    total = HEADER.count("\n")
    while total < lines:
        block = BLOCK.format(n=n)
        out.append(block)
        total += block.count("\n")
        n += 1
    return "".join(out)


def _median(fn, repeat: int, cpu: bool = False) -> float:  # type: ignore[no-untyped-def]
    """Median wall time of fn(), or with cpu=True the median CPU time of this process (what the audit costs
    when the machine's cores are shared: wall time then includes the time spent waiting for one)."""
    clock = time.process_time if cpu else time.perf_counter
    times = []
    for _ in range(repeat):
        start = clock()
        fn()
        times.append(clock() - start)
    return statistics.median(times)


def _ruff() -> str | None:
    found = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    return found if Path(found).exists() else None


def main(argv: list[str] | None = None) -> int:
    from bench_audit import reference_seconds

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    from envpin.audit import run

    ruff = _ruff()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in SIZES:
            path = Path(tmp) / f"train_{size}.py"
            text = script(size)
            path.write_text(text, encoding="utf-8")
            lines = text.count("\n")
            findings = len(run([str(path)], tf="2.16", fail_on="info").findings)
            audit_s = _median(lambda p=path: run([str(p)], tf="2.16", fail_on="info"), args.repeat)
            cpu_s = _median(lambda p=path: run([str(p)], tf="2.16", fail_on="info"), args.repeat, cpu=True)
            ruff_s = None
            if ruff:
                cmd = [ruff, "check", "--isolated", "--no-cache", "--quiet", "--exit-zero", str(path)]
                ruff_s = _median(lambda c=cmd: subprocess.run(c, capture_output=True, check=False), args.repeat)
            rows.append(
                {
                    "lines": lines,
                    "findings": findings,
                    "audit_s": round(audit_s, 4),
                    "audit_cpu_s": round(cpu_s, 4),
                    "audit_cpu_us_per_line": round(cpu_s / lines * 1e6, 2),
                    "audit_us_per_line": round(audit_s / lines * 1e6, 2),
                    "ruff_s": None if ruff_s is None else round(ruff_s, 4),
                    "ratio_to_ruff": None if not ruff_s else round(audit_s / ruff_s, 2),
                }
            )
    reference = reference_seconds(args.repeat)
    small, big = rows[0], rows[-1]
    linear = big["audit_cpu_us_per_line"] / small["audit_cpu_us_per_line"]
    ten_k = next(r for r in rows if r["lines"] >= 10_000)
    doc = {
        "machine": f"{platform.machine()} {os.cpu_count()} cpus, Python {platform.python_version()}",
        "loadavg": Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else None,
        "rows": rows,
        "linear_ratio": round(linear, 2),
        "reference_loop_s": round(reference, 3),
        "goals": {"10k_s": GOAL_10K_S, "linear_ratio": GOAL_LINEAR_RATIO},
        "met": ten_k["audit_cpu_s"] < GOAL_10K_S and linear <= GOAL_LINEAR_RATIO,
    }
    if args.json:
        print(json.dumps(doc, indent=2, sort_keys=True))
    else:
        print(f"{doc['machine']}; load {' '.join(doc['loadavg'] or [])}")
        print(
            f"{'lines':>8} {'findings':>9} {'audit s':>9} {'cpu s':>7} {'cpu us/line':>11} {'ruff s':>8} "
            f"{'audit/ruff':>10}"
        )
        for r in rows:
            print(
                f"{r['lines']:>8} {r['findings']:>9} {r['audit_s']:>9.3f} {r['audit_cpu_s']:>7.3f} "
                f"{r['audit_cpu_us_per_line']:>11.1f} {r['ruff_s'] if r['ruff_s'] is not None else '-':>8} "
                f"{r['ratio_to_ruff'] or '-':>10}"
            )
        print(
            f"10k-line script: {ten_k['audit_cpu_s']:.3f} s of CPU (goal < {GOAL_10K_S} s); per-line cost 100k/1k: "
            f"{linear:.2f} (goal <= {GOAL_LINEAR_RATIO}); {'met' if doc['met'] else 'NOT met'}"
        )
        print(f"reference loop (sum of 5 million squares): {reference:.3f} s; compare figures taken at one speed")
    return 0 if doc["met"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
