"""A small MobileNet-style block fine-tuned on a custom dataset (TF 2.7)."""
import os

os.environ["TF_DETERMINISTIC_OPS"] = "1"
os.environ["TF_USE_CUDNN_AUTOTUNE"] = "0"

import tensorflow as tf
from tensorflow.keras import layers

tf.random.set_seed(11)

inputs = tf.keras.Input((96, 96, 3))
x = layers.Conv2D(16, 3, strides=2, padding="same")(inputs)
x = layers.DepthwiseConv2D(3, padding="same")(x)
x = layers.BatchNormalization()(x)
x = layers.ReLU()(x)
x = layers.GlobalAveragePooling2D()(x)
outputs = layers.Dense(5, activation="softmax")(x)
model = tf.keras.Model(inputs, outputs)
model.compile(optimizer=tf.keras.optimizers.RMSprop(1e-3), loss="categorical_crossentropy")
images = tf.random.uniform([32, 96, 96, 3], seed=2)
model.fit(images, tf.one_hot(tf.range(32) % 5, 5), epochs=2)
