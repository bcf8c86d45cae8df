"""A tiny Keras model fed by a tf.data pipeline whose parallel map may emit elements out of order
(deterministic=False): with fixed seeds its loss still varies between runs unless op determinism is on.

Each element takes a variable time, as a read from a disk or a network would (up to 2 ms, from os.urandom,
which no seed controls), so the order in which the parallel calls finish changes from run to run."""

import json
import os
import time

import numpy as np
import tensorflow as tf

rng = np.random.RandomState(0)
x = rng.normal(size=(384, 16)).astype("float32")
y = (x[:, :4].sum(axis=1) > 0).astype("float32")


def _latency(features):
    time.sleep(os.urandom(1)[0] / 255 * 0.002)
    return features


def slow(features, label):
    features = tf.py_function(_latency, [features], tf.float32)
    features.set_shape([16])
    return features, label


data = (
    tf.data.Dataset.from_tensor_slices((x, y))
    .map(slow, num_parallel_calls=4, deterministic=False)
    .prefetch(8)  # keeps tf.data from fusing map and batch (a fused MapAndBatch fills batches in order)
    .batch(32)
)
model = tf.keras.Sequential(
    [tf.keras.Input((16,)), tf.keras.layers.Dense(8, activation="relu"), tf.keras.layers.Dense(1, activation="sigmoid")]
)
model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss="binary_crossentropy")
history = model.fit(data, epochs=2, verbose=0)
print(
    json.dumps(
        {
            "envpin_metrics": {
                "final_loss": history.history["loss"][-1],
                "weight_sum": float(sum(float(tf.reduce_sum(w)) for w in model.weights)),
            }
        }
    )
)
