"""Benchmark: what envpin.keras.EnvpinCallback adds to a Keras fit on CPU, side by side with the same fit without it.

    .venv/bin/python benchmarks/bench_track.py [--seconds 30] [--pairs 2] [--mlflow URI] [--json]

One process: a warm-up fit, then the number of epochs that makes one fit take about `--seconds`, then `--pairs`
pairs of fits of fresh models on the same data, with and without the callback, their order alternating. The
callback writes to a TensorBoard log folder (and with `--mlflow`, to that tracking server). Goals: under 1 %
of the fit spent in the callback (its start and end records, timed inside the fit) and under 0.5 s for the start
record (the probe and the lock, before the writers log it). The difference of the medians is printed too; on a shared
machine it is mostly the fits' own spread.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from typing import Any

GOAL_OVERHEAD, GOAL_START_S = 0.01, 0.5


def _timed(method: Any, spent: list[float]) -> Any:
    def wrapper(logs: Any = None) -> None:
        started = time.perf_counter()
        method(logs)
        spent[0] += time.perf_counter() - started

    return wrapper


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--mlflow", metavar="URI")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    import numpy as np
    import tensorflow as tf

    from envpin.keras import EnvpinCallback

    rng = np.random.RandomState(0)
    x = rng.rand(4096, 64).astype("float32")
    y = (x @ rng.rand(64, 1).astype("float32")).ravel()

    def fit(epochs: int, callbacks: list[object]) -> float:
        model = tf.keras.Sequential(
            [tf.keras.Input((64,)), tf.keras.layers.Dense(256, activation="relu"), tf.keras.layers.Dense(1)]
        )
        model.compile("sgd", "mse")
        started = time.perf_counter()
        model.fit(x, y, batch_size=64, epochs=epochs, verbose=0, callbacks=callbacks)
        return time.perf_counter() - started

    if args.mlflow:
        import mlflow

        mlflow.set_tracking_uri(args.mlflow)
        mlflow.set_experiment("envpin-bench")
    fit(1, [])  # warm-up: graph tracing, thread pools
    per_epoch = (fit(6, []) - fit(1, [])) / 5  # without what a fit costs once (the model, tracing)
    epochs = max(1, math.ceil(args.seconds / per_epoch))
    plain: list[float] = []
    tracked: list[float] = []
    starts: list[float] = []
    inside: list[float] = []  # seconds spent in the callback's own methods (start and end records)
    with tempfile.TemporaryDirectory(prefix="envpin-bench-") as tmp:
        for i in range(args.pairs):
            for with_callback in (i % 2 == 0, i % 2 != 0):
                if not with_callback:
                    plain.append(fit(epochs, []))
                    continue
                cb = EnvpinCallback(seed=1, tensorboard=os.path.join(tmp, f"tb{i}"), mlflow=bool(args.mlflow))
                spent = [0.0]
                for name in ("on_train_begin", "on_train_end"):
                    setattr(cb, name, _timed(getattr(cb, name), spent))
                tracked.append(fit(epochs, [cb]))
                inside.append(spent[0])
                assert cb.run is not None
                starts.append(cb.run.record["start_seconds"])
                if args.mlflow:
                    mlflow.end_run()
    base, with_cb = statistics.median(plain), statistics.median(tracked)
    result = {
        "epochs": epochs,
        "fit_without_s": [round(t, 3) for t in plain],
        "fit_with_s": [round(t, 3) for t in tracked],
        "overhead": round(with_cb / base - 1, 4),
        "callback_s": [round(t, 3) for t in inside],
        "callback_share": round(statistics.median(inside) / base, 4),
        "start_s": starts,
        "goal_overhead": GOAL_OVERHEAD,
        "goal_start_s": GOAL_START_S,
        "tensorflow": tf.__version__,
        "cpus": len(os.sched_getaffinity(0)),
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(
            f"fit of {epochs} epochs: median {base:.2f} s without, {with_cb:.2f} s with the callback "
            f"({100 * result['overhead']:+.2f} %); in the callback {statistics.median(inside):.3f} s "
            f"({100 * result['callback_share']:.2f} % of the fit); start record {max(starts):.3f} s at most"
        )
    met = result["callback_share"] < GOAL_OVERHEAD and max(starts) < GOAL_START_S
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
