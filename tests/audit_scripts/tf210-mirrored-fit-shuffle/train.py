"""MNIST under MirroredStrategy with tensorflow_datasets; the model is built and compiled in the scope."""
import tensorflow as tf
import tensorflow_datasets as tfds

strategy = tf.distribute.MirroredStrategy()


def datasets():
    splits = tfds.load("mnist", as_supervised=True)
    global_batch = 64 * strategy.num_replicas_in_sync

    def scale(image, label):
        return tf.cast(image, tf.float32) / 255.0, label

    train = splits["train"].map(scale).cache().shuffle(10000).batch(global_batch)
    test = splits["test"].map(scale).batch(global_batch)
    return train, test


def build():
    with strategy.scope():
        model = tf.keras.Sequential([
            tf.keras.layers.Conv2D(32, 3, activation="relu", input_shape=(28, 28, 1)),
            tf.keras.layers.MaxPooling2D(),
            tf.keras.layers.Flatten(),
            tf.keras.layers.Dense(64, activation="relu"),
            tf.keras.layers.Dense(10),
        ])
        model.compile(loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      optimizer=tf.keras.optimizers.Adam(), metrics=["accuracy"])
    return model


model = build()
train_ds, test_ds = datasets()
model.fit(train_ds, epochs=2)
model.save("saved/mnist")
