"""A custom training loop that checkpoints every step with tf.train.Checkpoint and resumes from its latest
checkpoint: a tiny linear model, SGD with momentum (one slot per variable), a shuffled tf.data pipeline.
Planted: the iterator is not in the checkpoint, so a resumed run starts the data over (the batch order of
the first steps again); with --fixed it is (tf.train.Checkpoint(iterator=...)), and a resumed run goes on
where the interrupted one stopped. The checkpoint folder is ENVPIN_RUNS_CHECKPOINT (envpin resume-check)."""

import json
import os
import sys

import tensorflow as tf

try:
    from envpin import before_step
except ImportError:  # outside envpin's runs: nothing to tell

    def before_step(step=None, **state):
        pass


STEPS = 6
tf.random.set_seed(int(os.environ.get("ENVPIN_SEED", "42")))
x = tf.reshape(tf.range(64 * 4, dtype=tf.float32), (64, 4)) / 100.0
y = tf.reduce_sum(x * [1.0, -2.0, 0.5, 3.0], axis=1, keepdims=True)
iterator = iter(tf.data.Dataset.from_tensor_slices((x, y)).shuffle(64, seed=1).batch(8).repeat())
w, b = tf.Variable(tf.zeros((4, 1))), tf.Variable(tf.zeros((1,)))
optimizer = tf.keras.optimizers.SGD(0.05, momentum=0.9)
optimizer.build([w, b])  # the slots exist before the restore fills them
step = tf.Variable(0, dtype=tf.int64)
state = {"w": w, "b": b, "optimizer": optimizer, "step": step}
if "--fixed" in sys.argv:
    state["iterator"] = iterator
checkpoint = tf.train.Checkpoint(**state)
manager = tf.train.CheckpointManager(checkpoint, os.environ.get("ENVPIN_RUNS_CHECKPOINT", "checkpoints"), 1)
checkpoint.restore(manager.latest_checkpoint)  # None: a fresh start


@tf.function
def train(xb, yb):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((tf.matmul(xb, w) + b - yb) ** 2)
    optimizer.apply_gradients(zip(tape.gradient(loss, [w, b]), [w, b], strict=True))
    return loss


loss = float("nan")
while int(step) < STEPS:
    before_step(int(step), model=[w, b], optimizer=optimizer, iterator=iterator)
    loss = float(train(*next(iterator)))
    step.assign_add(1)
    manager.save()
print(json.dumps({"envpin_metrics": {"loss": loss, "w0": float(w[0, 0])}}))
