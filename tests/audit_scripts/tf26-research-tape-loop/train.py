"""MNIST MLP trained by a compiled GradientTape step (Keras-for-researchers style)."""
import tensorflow as tf
from tensorflow import keras

net = keras.Sequential([keras.layers.Dense(64, activation="relu"), keras.layers.Dense(10)])
xent = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
adam = tf.keras.optimizers.Adam(learning_rate=1e-3)


@tf.function
def step(x, y):
    with tf.GradientTape() as tape:
        value = xent(y, net(x))
    grads = tape.gradient(value, net.trainable_weights)
    adam.apply_gradients(zip(grads, net.trainable_weights))
    return value


(images, labels), _ = tf.keras.datasets.mnist.load_data()
ds = tf.data.Dataset.from_tensor_slices((images.reshape(-1, 784).astype("float32") / 255, labels))
ds = ds.shuffle(2048).batch(128)
for i, (x, y) in enumerate(ds):
    value = step(x, y)
    if i % 200 == 0:
        print(i, float(value))
