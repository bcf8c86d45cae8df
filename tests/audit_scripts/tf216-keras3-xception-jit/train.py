"""Cats vs dogs from scratch: a small Xception, augmentation in the tf.data pipeline, XLA on (Keras 3)."""
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers

train_ds, val_ds = keras.utils.image_dataset_from_directory(
    "PetImages", validation_split=0.2, subset="both", seed=1337, image_size=(180, 180), batch_size=128
)
augment = keras.Sequential([layers.RandomFlip("horizontal"), layers.RandomRotation(0.1)])


def block(x, size):
    x = layers.Activation("relu")(x)
    x = layers.SeparableConv2D(size, 3, padding="same")(x)
    x = layers.BatchNormalization()(x)
    return layers.MaxPooling2D(3, strides=2, padding="same")(x)


inputs = keras.Input(shape=(180, 180, 3))
x = layers.Rescaling(1.0 / 255)(inputs)
x = layers.Conv2D(32, 3, strides=2, padding="same")(x)
for size in (64, 128, 256):
    residual = layers.Conv2D(size, 1, strides=2, padding="same")(x)
    x = layers.add([block(x, size), residual])
x = layers.GlobalAveragePooling2D()(x)
x = layers.Dropout(0.5)(x)
model = keras.Model(inputs, layers.Dense(1, activation="sigmoid")(x))

train_ds = train_ds.map(lambda img, label: (augment(img), label), num_parallel_calls=tf.data.AUTOTUNE)
train_ds = train_ds.prefetch(tf.data.AUTOTUNE)
model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="binary_crossentropy", jit_compile=True)
model.fit(train_ds, epochs=25, validation_data=val_ds)
