"""Custom training loop for a small classifier (TF 2.6), determinism through the environment."""
import os
import random

import numpy as np
import tensorflow as tf

os.environ["TF_DETERMINISTIC_OPS"] = "1"
SEED = 1234
random.seed(SEED)
np.random.seed(SEED)
tf.random.set_seed(SEED)

model = tf.keras.Sequential([
    tf.keras.layers.Flatten(input_shape=(28, 28)),
    tf.keras.layers.Dense(128, activation="relu"),
    tf.keras.layers.Dropout(0.2),
    tf.keras.layers.Dense(10),
])
optimizer = tf.keras.optimizers.SGD(0.01)


@tf.function
def train_step(images, labels):
    with tf.GradientTape() as tape:
        logits = model(images, training=True)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss


(x_train, y_train), _ = tf.keras.datasets.mnist.load_data()
dataset = tf.data.Dataset.from_tensor_slices((x_train / 255.0, y_train)).shuffle(1000, seed=SEED).batch(64)
for epoch in range(2):
    for images, labels in dataset:
        train_step(images, labels)
