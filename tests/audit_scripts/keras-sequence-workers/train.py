"""Audio tagging with a keras.utils.Sequence fed by worker processes (TF 2.3)."""
import time

import numpy as np
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras.layers import *

seed = int(time.time())
np.random.seed(seed)
tf.random.set_seed(seed)


class Clips(keras.utils.Sequence):
    def __init__(self, n, batch):
        self.n, self.batch = n, batch

    def __len__(self):
        return self.n // self.batch

    def __getitem__(self, i):
        x = np.random.rand(self.batch, 16000, 1).astype("float32")
        return x, np.random.randint(0, 41, self.batch)


inp = Input(shape=(16000, 1))
x = Conv1D(16, 9, activation="relu")(inp)
x = MaxPool1D(16)(x)
x = GlobalMaxPool1D()(x)
out = Dense(41, activation="softmax")(x)
model = keras.Model(inp, out)
model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy")
model.fit_generator(Clips(640, 32), epochs=5, use_multiprocessing=True, workers=6, max_queue_size=20)
