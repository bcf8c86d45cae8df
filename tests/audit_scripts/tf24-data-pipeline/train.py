"""Image classifier fed by a tf.data pipeline with on-the-fly augmentation (TF 2.4)."""
import os

import tensorflow as tf

os.environ["TF_DETERMINISTIC_OPS"] = "1"
tf.random.set_seed(42)
AUTOTUNE = tf.data.experimental.AUTOTUNE


def decode(path, label):
    image = tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
    return tf.image.resize(image, (224, 224)) / 255.0, label


def augment(image, label):
    image = tf.image.random_flip_left_right(image)
    image = tf.image.random_brightness(image, 0.2)
    return image, label


files = tf.data.Dataset.list_files("data/train/*/*.jpg", shuffle=True, seed=42)
records = files.interleave(lambda f: tf.data.Dataset.from_tensors((f, 0)), cycle_length=4,
                           num_parallel_calls=AUTOTUNE, deterministic=False)
train = records.map(decode, num_parallel_calls=AUTOTUNE).map(augment, num_parallel_calls=AUTOTUNE)
train = train.batch(32).prefetch(AUTOTUNE)

options = tf.data.Options()
options.experimental_deterministic = False
train = train.with_options(options)

base = tf.keras.applications.ResNet50(weights=None, classes=10)
base.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
base.fit(train, epochs=3)
