"""IMDB sentiment from raw text: TextVectorization in the pipeline, a 1D convnet (Keras 3)."""
import os

os.environ["KERAS_BACKEND"] = "tensorflow"

import keras
import tensorflow as tf
from keras import layers

raw_train = keras.utils.text_dataset_from_directory(
    "aclImdb/train", batch_size=32, validation_split=0.2, subset="training", seed=1337
)
raw_val = keras.utils.text_dataset_from_directory(
    "aclImdb/train", batch_size=32, validation_split=0.2, subset="validation", seed=1337
)


def standardize(text):
    return tf.strings.regex_replace(tf.strings.lower(text), "<br />", " ")


vectorize = layers.TextVectorization(standardize=standardize, max_tokens=20000, output_sequence_length=500)
vectorize.adapt(raw_train.map(lambda x, y: x))
train_ds = raw_train.map(lambda x, y: (vectorize(tf.expand_dims(x, -1)), y)).cache().prefetch(10)
val_ds = raw_val.map(lambda x, y: (vectorize(tf.expand_dims(x, -1)), y)).cache().prefetch(10)

inputs = keras.Input(shape=(None,), dtype="int64")
x = layers.Embedding(20000, 128)(inputs)
x = layers.Dropout(0.5)(x)
x = layers.Conv1D(128, 7, strides=3, activation="relu")(x)
x = layers.Conv1D(128, 7, strides=3, activation="relu")(x)
x = layers.GlobalMaxPooling1D()(x)
x = layers.Dropout(0.5)(x)
model = keras.Model(inputs, layers.Dense(1, activation="sigmoid")(x))
model.compile(loss="binary_crossentropy", optimizer="adam", metrics=["accuracy"])
model.fit(train_ds, validation_data=val_ds, epochs=3)
