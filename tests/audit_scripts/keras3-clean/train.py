"""The same convnet, set up for repeatable runs (Keras 3, TensorFlow 2.17)."""
import keras
import tensorflow as tf
from keras import layers

keras.utils.set_random_seed(812)
tf.config.experimental.enable_op_determinism()

(x_train, y_train), _ = keras.datasets.mnist.load_data()
model = keras.Sequential([
    keras.Input(shape=(28, 28)),
    layers.Reshape((28, 28, 1)),
    layers.Conv2D(32, 3, activation="relu"),
    layers.MaxPooling2D(),
    layers.Flatten(),
    layers.Dense(10, activation="softmax"),
])
model.compile(loss="sparse_categorical_crossentropy", optimizer="adam", jit_compile=False)
model.fit(x_train / 255.0, y_train, batch_size=128, epochs=2)
