"""CIFAR-10 under MirroredStrategy, trained batch by batch with train_on_batch (TF 2.4)."""
import tensorflow as tf
from tensorflow.keras import datasets, layers, models

options = tf.data.Options()
options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
(train_x, train_y), _ = datasets.cifar10.load_data()
train = tf.data.Dataset.from_tensor_slices((train_x / 255.0, train_y)).with_options(options).batch(32)

strategy = tf.distribute.MirroredStrategy()
with strategy.scope():
    model = models.Sequential([
        layers.Conv2D(32, 3, activation="relu", input_shape=(32, 32, 3)),
        layers.MaxPooling2D(),
        layers.Conv2D(64, 3, activation="relu"),
        layers.Flatten(),
        layers.Dense(10),
    ])
    model.compile(optimizer="adam", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])

for x, y in train:
    logs = model.train_on_batch(x, y)
