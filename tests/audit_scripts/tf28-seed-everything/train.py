"""Tabular regression with a seed helper (TF 2.8)."""
import os
import random

import numpy as np
import tensorflow as tf


def set_seed(seed):
    os.environ["PYTHONHASHSEED"] = str(seed)
    random.seed(seed)
    np.random.seed(seed)
    tf.random.set_seed(seed)
    os.environ["TF_DETERMINISTIC_OPS"] = "1"


set_seed(42)
features = np.random.rand(1000, 8).astype("float32")
target = features.sum(axis=1)
model = tf.keras.Sequential([tf.keras.layers.Dense(32, activation="relu"), tf.keras.layers.Dense(1)])
model.compile(optimizer="adam", loss="mse")
model.fit(features, target, epochs=10, batch_size=32, shuffle=True)
