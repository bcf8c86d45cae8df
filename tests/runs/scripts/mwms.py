"""A tiny logistic regression trained by a custom loop with MultiWorkerMirroredStrategy (RING collectives),
one worker of TF_CONFIG's cluster per process (started by workers.py). Each worker trains on its own half of
the data; the chief (worker 0) prints the metrics line.

    --plant-task I   worker I also adds a weighted tf.math.bincount (nondeterministic on CPU) to its logits
    --fail-task I    worker I raises after training (its launcher may still exit 0)
    --exit-task I    worker I ends after training without Python's shutdown (os._exit: it leaves no record)
"""

import json
import os
import sys

import numpy as np
import tensorflow as tf


def option(name):
    args = sys.argv[1:]
    return int(args[args.index(name) + 1]) if name in args else None


tf.config.threading.set_intra_op_parallelism_threads(8)  # see bincount.py
strategy = tf.distribute.MultiWorkerMirroredStrategy(
    communication_options=tf.distribute.experimental.CommunicationOptions(implementation="RING")
)
task = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
rng = np.random.RandomState(0)
x = rng.normal(size=(256, 8)).astype("float32")
y = (x.sum(axis=1, keepdims=True) > 0).astype("float32")
ids = rng.randint(0, 1024, size=(16 * 4096,)).astype("int32")
xs, ys = x[task::2], y[task::2]
with strategy.scope():
    w = tf.Variable(tf.random.normal([8, 1]), aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
    b = tf.Variable(tf.zeros([1]), aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)


@tf.function(autograph=False)  # the plant is chosen in Python, by the task
def step(xb, yb):
    def replica_fn(xb, yb):
        with tf.GradientTape() as tape:
            logits = tf.matmul(xb, w) + b
            if task == option("--plant-task"):
                weights = tf.reshape(tf.tile(xb[:, :1], [1, 4096]), [-1])
                bins = tf.math.bincount(ids, weights=weights, minlength=1024, maxlength=1024)  # planted
                logits += tf.reduce_sum(tf.reshape(bins, [16, 64]), axis=1, keepdims=True) * 1e-3
            loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(yb, logits))
        context = tf.distribute.get_replica_context()
        grads = context.all_reduce("mean", tape.gradient(loss, [w, b]))
        w.assign_sub(0.1 * grads[0])
        b.assign_sub(0.1 * grads[1])
        return context.all_reduce("mean", loss)

    return strategy.run(replica_fn, args=(xb, yb))


for i in range(4):
    loss = step(tf.constant(xs[i * 16 : (i + 1) * 16]), tf.constant(ys[i * 16 : (i + 1) * 16]))
if task == option("--fail-task"):
    raise RuntimeError(f"planted failure of worker {task} after training")
if task == option("--exit-task"):
    os._exit(0)
if task == 0:
    print(json.dumps({"envpin_metrics": {"loss": float(loss), "weight_sum": float(tf.reduce_sum(w))}}))
