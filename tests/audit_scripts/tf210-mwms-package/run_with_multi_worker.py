"""Multi-worker training: each worker runs this with its own TF_CONFIG."""
import json
import os

import tensorflow as tf

import mnist_setup

tf_config = json.loads(os.environ["TF_CONFIG"])
workers = len(tf_config["cluster"]["worker"])
strategy = tf.distribute.MultiWorkerMirroredStrategy()
dataset = mnist_setup.mnist_dataset(64 * workers)
with strategy.scope():
    model = mnist_setup.build_and_compile_cnn_model()
model.fit(dataset, epochs=3, steps_per_epoch=70)
