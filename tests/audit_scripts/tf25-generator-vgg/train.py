"""VGG16 from scratch on a synthetic from_generator dataset."""
import numpy as np
import tensorflow as tf

SHAPE, CLASSES = (32, 32, 3), 10


def synthetic(n):
    def gen():
        for _ in range(n):
            image = np.random.random_sample(SHAPE).astype(np.float32)
            label = np.random.randint(0, CLASSES, dtype=np.int32)
            yield image, label

    return gen


data = tf.data.Dataset.from_generator(
    synthetic(10), output_types=(tf.float32, tf.int32), output_shapes=(SHAPE, ())
).batch(5, drop_remainder=True)
model = tf.keras.applications.VGG16(weights=None, input_shape=SHAPE, classes=CLASSES)
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
model.fit(data, epochs=2)
