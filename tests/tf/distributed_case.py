"""One case of the distributed recipe's measurements in a fresh process (docs/distributed.md, "Measured"):
`python distributed_case.py CASE REPLICAS` prints one JSON line with a hash of each replica's values.
MirroredStrategy over REPLICAS logical CPU devices, set_random_seed(1) and op determinism on (D9M=0: off)."""

import hashlib
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np
import tensorflow as tf

exp, n = sys.argv[1], int(sys.argv[2])
cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(n)])
devices = [f"/cpu:{i}" for i in range(n)]
tf.keras.utils.set_random_seed(1)
if os.environ.get("D9M", "1") == "1":
    tf.config.experimental.enable_op_determinism()
strategy = tf.distribute.MirroredStrategy(devices)


def h(a):
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()[:12]


def per_replica(values):
    return [v.numpy() for v in strategy.experimental_local_results(values)]


out = {"exp": exp, "replicas": n, "tf": tf.__version__}
if exp == "gen_in_scope":
    with strategy.scope():
        g = tf.random.Generator.from_seed(7)
    vals = [per_replica(strategy.run(lambda: g.normal([4]))) for _ in range(3)]
    out["replica_streams"] = [h(np.stack([v[r] for v in vals])) for r in range(n)]
elif exp in ("gen_outside_eager", "gen_outside_fn"):
    g = tf.random.Generator.from_seed(7)
    step = lambda: g.normal([4])  # noqa: E731
    run = (lambda: strategy.run(step)) if exp.endswith("eager") else tf.function(lambda: strategy.run(step))
    vals = [per_replica(run()) for _ in range(20)]
    out["replica_streams"] = [h(np.stack([v[r] for v in vals])) for r in range(n)]
elif exp == "global_gen_fn":
    tf.random.set_global_generator(tf.random.Generator.from_seed(7))
    run = tf.function(lambda: strategy.run(lambda: tf.random.get_global_generator().normal([4])))
    vals = [per_replica(run()) for _ in range(20)]
    out["replica_streams"] = [h(np.stack([v[r] for v in vals])) for r in range(n)]
elif exp.startswith("sample"):
    a = tf.data.Dataset.range(0, 1000)
    b = tf.data.Dataset.range(10000, 11000)
    seed = 3 if exp == "sample_seeded" else None
    ds = tf.data.Dataset.sample_from_datasets([a, b], weights=[0.5, 0.5], seed=seed).batch(8)
    dist = strategy.experimental_distribute_dataset(ds)
    it = iter(dist)
    vals = [per_replica(next(it)) for _ in range(50)]
    out["replica_batches"] = [h(np.concatenate([v[r] for v in vals])) for r in range(n)]
elif exp.startswith("shuffle"):

    def make(ctx=None):
        return tf.data.Dataset.range(1000).shuffle(1000).batch(8)

    if exp == "shuffle_fn":
        dist = strategy.distribute_datasets_from_function(make)
    else:
        dist = strategy.experimental_distribute_dataset(make())
    it = iter(dist)
    vals = [per_replica(next(it)) for _ in range(30)]
    out["replica_batches"] = [h(np.concatenate([v[r] for v in vals])) for r in range(n)]
elif exp == "train":
    x = np.random.RandomState(0).normal(size=(256, 32)).astype("float32")
    y = np.random.RandomState(1).normal(size=(256, 1)).astype("float32")
    with strategy.scope():
        model = tf.keras.Sequential(
            [tf.keras.Input((32,)), tf.keras.layers.Dense(64, activation="relu"), tf.keras.layers.Dense(1)]
        )
        model.compile(optimizer=tf.keras.optimizers.SGD(0.01), loss="mse")
    model.fit(x, y, batch_size=32, epochs=3, shuffle=False, verbose=0)
    out["weights"] = h(np.concatenate([w.ravel() for w in model.get_weights()]))
print(json.dumps(out, sort_keys=True))
