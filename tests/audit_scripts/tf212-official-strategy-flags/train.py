"""A trainer whose strategy comes from a flag, as in tensorflow/models (TF 2.12), run with op determinism on."""
import argparse

import tensorflow as tf


def collective_for(algorithm):
    choices = {
        None: tf.distribute.experimental.CollectiveCommunication.AUTO,
        "ring": tf.distribute.experimental.CollectiveCommunication.RING,
        "nccl": tf.distribute.experimental.CollectiveCommunication.NCCL,
    }
    if algorithm not in choices:
        raise ValueError(f"unknown all-reduce algorithm {algorithm!r}")
    return choices[algorithm]


def make_strategy(kind, gpus, algorithm=None):
    if kind == "multi_worker_mirrored":
        return tf.distribute.experimental.MultiWorkerMirroredStrategy(
            communication=collective_for(algorithm))
    if kind == "parameter_server":
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        return tf.distribute.experimental.ParameterServerStrategy(resolver)
    if kind == "mirrored":
        return tf.distribute.MirroredStrategy([f"/gpu:{n}" for n in range(gpus)])
    return tf.distribute.OneDeviceStrategy("/gpu:0")


parser = argparse.ArgumentParser()
parser.add_argument("--strategy", default="mirrored")
parser.add_argument("--gpus", type=int, default=1)
parser.add_argument("--all_reduce_alg", default=None)
flags = parser.parse_args()

tf.keras.utils.set_random_seed(7)
tf.config.experimental.enable_op_determinism()
strategy = make_strategy(flags.strategy, flags.gpus, flags.all_reduce_alg)
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.layers.Dense(32, activation="relu"), tf.keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse")
features = tf.random.normal((256, 8), seed=1)
targets = tf.random.normal((256, 1), seed=2)
model.fit(features, targets, batch_size=32, epochs=2)
