"""A tiny Keras model with a weighted tf.math.bincount inside a layer: on CPU its float sums depend on thread
scheduling, so two runs with the same seeds differ there first (envpin bisect should name this line)."""

import json

import numpy as np
import tensorflow as tf

# More intra-op threads than this machine's cores: the kernel's per-thread partial sums then take a different
# share of the weights in nearly every call, so a run of a few steps differs (with one thread per core, two
# runs sometimes split the work alike and stay bit-identical).
tf.config.threading.set_intra_op_parallelism_threads(8)
rng = np.random.RandomState(0)
x = rng.normal(size=(128, 8)).astype("float32")
y = (x.sum(axis=1) > 0).astype("float32")
ids = rng.randint(0, 1024, size=(128, 4096)).astype("int32")


class Histogram(tf.keras.layers.Layer):
    """Weighted histogram of 16 x 4096 ids per batch into 1024 bins (64 weights per bin)."""

    def call(self, inputs):
        features, idx = inputs
        weights = tf.reshape(tf.tile(features[:, :1], [1, 4096]), [-1])
        bins = tf.math.bincount(tf.reshape(idx, [-1]), weights=weights, minlength=1024, maxlength=1024)  # planted
        return tf.zeros_like(features) + bins[None, :8]  # (batch, 8): a shape every Keras infers

    def compute_output_shape(self, shapes):
        return (shapes[0][0], 8)


features = tf.keras.Input((8,))
idx = tf.keras.Input((4096,), dtype="int32")
hidden = tf.keras.layers.Concatenate()([features, Histogram()([features, idx])])
model = tf.keras.Model([features, idx], tf.keras.layers.Dense(1, activation="sigmoid")(hidden))
model.compile(optimizer="adam", loss="binary_crossentropy")
history = model.fit([x, ids], y, batch_size=16, epochs=1, verbose=0)
print(json.dumps({"envpin_metrics": {"final_loss": history.history["loss"][-1]}}))
