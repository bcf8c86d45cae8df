"""A tiny Keras model trained with MirroredStrategy over this machine's CPU split into 2 logical devices (2
replicas in one process). Nothing in it is nondeterministic on CPU, unless `--plant`: then a layer sums a
weighted tf.math.bincount on replica 1 only (replica 0 sums the same weights with the sequential
unsorted_segment_sum), so the runs first differ on replica 1's device and reach replica 0 through the
all-reduce of the gradients (envpin bisect --replica 1 should name the bincount's line)."""

import json
import sys

import numpy as np
import tensorflow as tf

PLANT = "--plant" in sys.argv[1:]
# More intra-op threads than this machine's cores: the bincount kernel's per-thread partial sums then take a
# different share of the weights in nearly every call (see bincount.py).
tf.config.threading.set_intra_op_parallelism_threads(8)
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
rng = np.random.RandomState(0)
x = rng.normal(size=(128, 8)).astype("float32")
y = (x.sum(axis=1) > 0).astype("float32")
ids = rng.randint(0, 1024, size=(128, 4096)).astype("int32")


class Histogram(tf.keras.layers.Layer):
    """A weighted histogram of the batch's ids into 1024 bins, folded into 8 features."""

    def call(self, inputs):
        features, idx = inputs
        context = tf.distribute.get_replica_context()
        replica = tf.get_static_value(context.replica_id_in_sync_group) if context is not None else 0
        weights = tf.reshape(tf.tile(features[:, :1], [1, 4096]), [-1])
        flat = tf.reshape(idx, [-1])
        if replica == 1:
            bins = tf.math.bincount(flat, weights=weights, minlength=1024, maxlength=1024)  # planted
        else:
            bins = tf.math.unsorted_segment_sum(weights, flat, 1024)
        folded = tf.reduce_sum(tf.reshape(bins, [8, 128]), axis=1)
        return tf.zeros_like(features) + folded[None, :] * 1e-3

    def compute_output_shape(self, shapes):
        return (shapes[0][0], 8)


with strategy.scope():
    features = tf.keras.Input((8,))
    if PLANT:
        idx = tf.keras.Input((4096,), dtype="int32")
        hidden = tf.keras.layers.Concatenate()([features, Histogram()([features, idx])])
        inputs, data = [features, idx], [x, ids]
    else:
        hidden, inputs, data = features, features, x
    hidden = tf.keras.layers.Dense(16, activation="relu")(hidden)
    model = tf.keras.Model(inputs, tf.keras.layers.Dense(1, activation="sigmoid")(hidden))
    model.compile(optimizer="adam", loss="binary_crossentropy")
history = model.fit(data, y, batch_size=16, epochs=2, verbose=0)
print(json.dumps({"envpin_metrics": {"final_loss": history.history["loss"][-1]}}))
