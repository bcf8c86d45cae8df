"""Message passing over a graph: node states summed from their incoming edges (TF 2.5)."""
import os

os.environ["TF_DETERMINISTIC_OPS"] = "1"

import tensorflow as tf
from tensorflow.math import unsorted_segment_sum as scatter_sum

tf.random.set_seed(7)


class MessagePassing(tf.keras.layers.Layer):
    def __init__(self, units):
        super().__init__()
        self.dense = tf.keras.layers.Dense(units, activation="relu")

    def call(self, nodes, senders, receivers):
        messages = self.dense(tf.gather(nodes, senders))
        return scatter_sum(messages, receivers, num_segments=tf.shape(nodes)[0])


layer = MessagePassing(16)
optimizer = tf.keras.optimizers.Adam(1e-3)
nodes = tf.random.normal([10, 16], seed=1)
senders = tf.constant([0, 1, 2, 3])
receivers = tf.constant([1, 2, 3, 0])
for _ in range(5):
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(layer(nodes, senders, receivers))
    grads = tape.gradient(loss, layer.trainable_variables)
    optimizer.apply_gradients(zip(grads, layer.trainable_variables))
