"""FordA engine-noise classification with a fully convolutional network."""
import numpy as np
import tensorflow as tf
from tensorflow import keras


def read_ucr(path):
    table = np.loadtxt(path, delimiter="\t")
    return table[:, 1:], table[:, 0].astype(int)


x_train, y_train = read_ucr("FordA_TRAIN.tsv")
x_test, y_test = read_ucr("FordA_TEST.tsv")
x_train = x_train.reshape((x_train.shape[0], x_train.shape[1], 1))
x_test = x_test.reshape((x_test.shape[0], x_test.shape[1], 1))
order = np.random.permutation(len(x_train))
x_train, y_train = x_train[order], y_train[order]
y_train[y_train == -1] = 0
y_test[y_test == -1] = 0


def block(x):
    x = keras.layers.Conv1D(filters=64, kernel_size=3, padding="same")(x)
    x = keras.layers.BatchNormalization()(x)
    return keras.layers.ReLU()(x)


inputs = keras.layers.Input(x_train.shape[1:])
features = keras.layers.GlobalAveragePooling1D()(block(block(block(inputs))))
model = keras.models.Model(inputs, keras.layers.Dense(2, activation="softmax")(features))
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["sparse_categorical_accuracy"])
model.fit(
    x_train,
    y_train,
    batch_size=32,
    epochs=500,
    validation_split=0.2,
    callbacks=[keras.callbacks.EarlyStopping(monitor="val_loss", patience=50)],
)
print(tf.reduce_mean(model.predict(x_test)))
