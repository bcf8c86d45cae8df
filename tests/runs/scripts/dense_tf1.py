"""The dense model of dense.py as TensorFlow 1.x's Keras takes it (a Sequential there cannot start with an
Input tensor: the first layer names its input shape). Its metrics: `init`, the sum of the first kernel as
initialised (fixed by the seed alone), and the Keras History. TensorFlow 1.12's CPU training is not always
bit-identical under load (a run in three differed in the 6th digit with three at once), its initial weights are."""

import json

import numpy as np
import tensorflow as tf

rng = np.random.RandomState(0)
x = rng.normal(size=(128, 8)).astype("float32")
y = (x.sum(axis=1) > 0).astype("float32")
model = tf.keras.Sequential(
    [tf.keras.layers.Dense(16, activation="relu", input_shape=(8,)), tf.keras.layers.Dense(1, activation="sigmoid")]
)
model.compile(optimizer="adam", loss="binary_crossentropy")
init = float(np.sum(model.get_weights()[0]))
history = model.fit(x, y, batch_size=16, epochs=2, verbose=0)
print(json.dumps({"envpin_metrics": {"init": init, "final_loss": history.history["loss"][-1]}}))
