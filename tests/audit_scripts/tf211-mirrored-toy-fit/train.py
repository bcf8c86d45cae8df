"""Binary classifier on random data, replicated with MirroredStrategy."""
import numpy as np
import tensorflow as tf
from tensorflow.keras import layers

strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    clf = tf.keras.Sequential([layers.Dense(32, activation="relu", input_shape=(12,)), layers.Dense(1)])
    clf.compile(loss=tf.keras.losses.BinaryCrossentropy(from_logits=True), optimizer=tf.keras.optimizers.SGD(0.1))

features = np.random.random((2048, 12)).astype("float32")
targets = np.random.randint(2, size=(2048, 1))
data = tf.data.Dataset.from_tensor_slices((features, targets)).shuffle(buffer_size=2048).batch(64)
clf.fit(data, epochs=2)
