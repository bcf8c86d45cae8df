"""A small ResNet on a synthetic 4-class image task, for `envpin study` (docs/runs.md): the shape of Morin &
Willetts' experiment (the same training run many times, every seed fixed, or the seed varied) on a CPU.

The data are made here from a fixed NumPy generator (no download; the same in every run). The seed of the
run is read from ENVPIN_SEED (envpin's hook seeds Python, NumPy and TensorFlow with it too). The input
pipeline reads its examples with a parallel map that may deliver them out of order (deterministic=False),
each taking a variable time as a read from a disk would: that is the run-to-run nondeterminism this CPU
example has; on a GPU, cuDNN's and atomics-based kernels add theirs.

Last line on stdout: {"envpin_metrics": {"test_accuracy": ..., "test_loss": ...}}.
"""

import json
import os
import time

import numpy as np
import tensorflow as tf

SIZE, CLASSES, TRAIN, TEST = 16, 4, 1024, 512


def make_data(n, rng):
    """Images of noise with a bright blob whose position (a quadrant) is the class."""
    labels = rng.randint(0, CLASSES, size=n)
    yy, xx = np.mgrid[0:SIZE, 0:SIZE]
    images = rng.normal(0.0, 1.0, size=(n, SIZE, SIZE, 1)).astype("float32")
    for i, label in enumerate(labels):
        cy = (label // 2) * SIZE / 2 + SIZE / 4 + rng.normal(0, 2)
        cx = (label % 2) * SIZE / 2 + SIZE / 4 + rng.normal(0, 2)
        images[i, :, :, 0] += 1.2 * np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / 8.0)
    return images, labels.astype("int32")


def read_like_a_disk(image):
    time.sleep(os.urandom(1)[0] / 255 * 0.001)  # variable latency, which no seed controls
    return image


def load(image, label):
    image = tf.py_function(read_like_a_disk, [image], tf.float32)
    image.set_shape([SIZE, SIZE, 1])
    return image, label


def block(x, filters, stride):
    shortcut = x
    x = tf.keras.layers.Conv2D(filters, 3, stride, padding="same", use_bias=False)(x)
    x = tf.keras.layers.BatchNormalization()(x)
    x = tf.keras.layers.ReLU()(x)
    x = tf.keras.layers.Conv2D(filters, 3, padding="same", use_bias=False)(x)
    x = tf.keras.layers.BatchNormalization()(x)
    if stride != 1 or shortcut.shape[-1] != filters:
        shortcut = tf.keras.layers.Conv2D(filters, 1, stride, use_bias=False)(shortcut)
    return tf.keras.layers.ReLU()(x + shortcut)


def resnet():
    inputs = tf.keras.Input((SIZE, SIZE, 1))
    x = tf.keras.layers.Conv2D(16, 3, padding="same", use_bias=False)(inputs)
    for filters, stride in ((16, 1), (32, 2), (64, 2)):
        x = block(x, filters, stride)
    x = tf.keras.layers.GlobalAveragePooling2D()(x)
    return tf.keras.Model(inputs, tf.keras.layers.Dense(CLASSES)(x))


def main():
    data_rng = np.random.RandomState(2020)  # the data never change
    x_train, y_train = make_data(TRAIN, data_rng)
    x_test, y_test = make_data(TEST, data_rng)
    train = (
        tf.data.Dataset.from_tensor_slices((x_train, y_train))
        .shuffle(TRAIN, seed=int(os.environ.get("ENVPIN_SEED", "0")))
        .map(load, num_parallel_calls=4, deterministic=False)
        .prefetch(16)
        .batch(32)
    )
    model = resnet()
    model.compile(
        optimizer=tf.keras.optimizers.SGD(0.05, momentum=0.9),
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    model.fit(train, epochs=3, verbose=0)
    loss, accuracy = model.evaluate(x_test, y_test, batch_size=128, verbose=0)
    print(json.dumps({"envpin_metrics": {"test_accuracy": accuracy, "test_loss": loss}}))


if __name__ == "__main__":
    main()
