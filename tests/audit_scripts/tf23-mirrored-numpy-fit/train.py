"""A wide CIFAR-10 convnet built under MirroredStrategy and fitted on NumPy arrays."""
import matplotlib.pyplot as plt
import tensorflow as tf
from tensorflow.keras import datasets, layers, models

(train_images, train_labels), (test_images, test_labels) = datasets.cifar10.load_data()
strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = models.Sequential()
    model.add(layers.Conv2D(256, 3, activation="relu", input_shape=(32, 32, 3)))
    model.add(layers.MaxPooling2D(2))
    model.add(layers.Conv2D(256, 3, activation="relu"))
    model.add(layers.Flatten())
    model.add(layers.Dense(10))

model.compile(optimizer="adam", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
history = model.fit(train_images, train_labels, batch_size=1000, epochs=10, validation_data=(test_images, test_labels))
plt.plot(history.history["loss"])
