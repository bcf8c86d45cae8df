# This Python 3 environment comes with many helpful analytics libraries installed

import numpy as np  # noqa: F401  linear algebra
import pandas as pd  # noqa: F401  data processing

import os

for dirname, _, filenames in os.walk("/kaggle/input"):
    for filename in filenames:
        print(os.path.join(dirname, filename))

from keras.datasets import mnist
from keras.utils import to_categorical

(train_x, train_y), (test_x, test_y) = mnist.load_data()
train_x = train_x.reshape((60000, 28, 28, 1)).astype("float32") / 255
test_x = test_x.reshape((10000, 28, 28, 1)).astype("float32") / 255
train_y, test_y = to_categorical(train_y), to_categorical(test_y)

from keras import layers, models

net = models.Sequential()
net.add(layers.Conv2D(32, (3, 3), activation="relu", input_shape=(28, 28, 1)))
net.add(layers.MaxPooling2D((2, 2)))
net.add(layers.Conv2D(64, (3, 3), activation="relu"))
net.add(layers.Flatten())
net.add(layers.Dense(10, activation="softmax"))
net.compile(optimizer="rmsprop", loss="categorical_crossentropy", metrics=["accuracy"])
net.fit(train_x, train_y, epochs=5, batch_size=64)
print(net.evaluate(test_x, test_y))
