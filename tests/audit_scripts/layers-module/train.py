"""Model building blocks imported by the training scripts (no training here)."""
import tensorflow as tf
from tensorflow.keras import layers


def conv_block(x, filters, dropout=0.1):
    x = layers.Conv2D(filters, 3, padding="same", use_bias=False)(x)
    x = layers.BatchNormalization()(x)
    x = layers.Activation("relu")(x)
    return layers.SpatialDropout2D(dropout)(x)


def build(input_shape=(64, 64, 3), classes=10):
    inputs = tf.keras.Input(input_shape)
    x = conv_block(inputs, 32)
    x = layers.AveragePooling2D()(x)
    x = conv_block(x, 64)
    x = layers.GlobalAveragePooling2D()(x)
    return tf.keras.Model(inputs, layers.Dense(classes)(x))
