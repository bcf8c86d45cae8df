"""Data-parallel Keras training with Horovod (TF 2.4)."""
import os

import horovod.tensorflow.keras as hvd
import tensorflow as tf

os.environ["TF_DETERMINISTIC_OPS"] = "1"
hvd.init()
tf.random.set_seed(hvd.rank())

gpus = tf.config.experimental.list_physical_devices("GPU")
if gpus:
    tf.config.experimental.set_visible_devices(gpus[hvd.local_rank()], "GPU")

(x, y), _ = tf.keras.datasets.mnist.load_data()
data = tf.data.Dataset.from_tensor_slices((x[..., None] / 255.0, y)).repeat().shuffle(10000, seed=1).batch(128)
model = tf.keras.Sequential([tf.keras.layers.Conv2D(32, 3, activation="relu"), tf.keras.layers.Flatten(),
                             tf.keras.layers.Dense(10, activation="softmax")])
opt = hvd.DistributedOptimizer(tf.keras.optimizers.Adam(0.001 * hvd.size()))
model.compile(loss="sparse_categorical_crossentropy", optimizer=opt, experimental_run_tf_function=False)
model.fit(data, steps_per_epoch=500 // hvd.size(), epochs=3,
          callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)])
