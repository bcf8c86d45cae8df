"""Fashion-MNIST on every worker of a TF_CONFIG cluster, Keras fit under MultiWorkerMirroredStrategy (TF 2.18)."""
import json
import os

import numpy as np
import tensorflow as tf

PER_WORKER_BATCH = 32
cluster = json.loads(os.environ.get("TF_CONFIG", "{}")).get("cluster", {})
workers = max(1, len(cluster.get("worker", [])))

strategy = tf.distribute.MultiWorkerMirroredStrategy()


def fashion_pipeline(global_batch):
    (pixels, classes), _ = tf.keras.datasets.fashion_mnist.load_data()
    pixels = (pixels / np.float32(255.0))[..., None]
    pairs = tf.data.Dataset.from_tensor_slices((pixels, classes.astype(np.int64)))
    return pairs.shuffle(len(pixels)).repeat().batch(global_batch)


def small_convnet():
    net = tf.keras.Sequential([
        tf.keras.Input(shape=(28, 28, 1)),
        tf.keras.layers.Conv2D(16, 3, activation="relu"),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(64, activation="relu"),
        tf.keras.layers.Dense(10),
    ])
    net.compile(optimizer=tf.keras.optimizers.SGD(0.01),
                loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                metrics=["accuracy"])
    return net


train_data = fashion_pipeline(PER_WORKER_BATCH * workers)
with strategy.scope():
    classifier = small_convnet()
classifier.fit(train_data, epochs=2, steps_per_epoch=50)
