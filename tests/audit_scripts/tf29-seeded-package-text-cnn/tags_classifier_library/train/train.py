"""One binary text classifier per tag: tokenizer, 1D convnet, fit with early stopping."""
import logging

import numpy as np
import tensorflow as tf
from sklearn.model_selection import train_test_split
from tensorflow.keras.callbacks import EarlyStopping
from tensorflow.keras.layers import Conv1D, Dense, Dropout, Embedding, GlobalMaxPool1D
from tensorflow.keras.models import Sequential
from tensorflow.keras.preprocessing import sequence
from tensorflow.keras.preprocessing.text import Tokenizer

from tags_classifier_library.settings import EMBEDDING_DIM, MAX_WORDS, SEQUENCE_LENGTH, THRESHOLD

logger = logging.getLogger(__name__)


def tokens(frame):
    tokenizer = Tokenizer(num_words=MAX_WORDS, lower=True)
    tokenizer.fit_on_texts(frame["sentence"].values)
    return tokenizer


def split(frame, tokenizer, tags):
    x = sequence.pad_sequences(tokenizer.texts_to_sequences(frame["sentence"].values), maxlen=SEQUENCE_LENGTH)
    return train_test_split(x, frame[tags].values, test_size=0.1, random_state=42, shuffle=True)


def cnn():
    model = Sequential()
    model.add(Embedding(MAX_WORDS, EMBEDDING_DIM, input_length=SEQUENCE_LENGTH))
    model.add(Conv1D(128, 5, activation="relu"))
    model.add(GlobalMaxPool1D())
    model.add(Dense(8, activation="relu"))
    model.add(Dropout(0.2))
    model.add(Dense(1, activation="sigmoid"))
    return model


def train_tag(x_train, y_train, x_val, y_val, weight):
    model = cnn()
    model.compile(loss="binary_crossentropy", optimizer="adam", metrics=[tf.keras.metrics.AUC(name="auc")])
    model.fit(
        x_train,
        y_train,
        epochs=20,
        batch_size=64,
        class_weight={0: 1, 1: weight},
        validation_data=(x_val, y_val),
        callbacks=[EarlyStopping(monitor="val_auc", mode="max", patience=3, restore_best_weights=True)],
        verbose=0,
    )
    return model


def build_models(frame, tags):
    tokenizer = tokens(frame)
    x_train, x_test, y_train, y_test = split(frame, tokenizer, tags)
    scores = {}
    for i, tag in enumerate(tags):
        weight = float((y_train[:, i] == 0).sum()) / max(1, (y_train[:, i] == 1).sum())
        model = train_tag(x_train, y_train[:, i], x_test, y_test[:, i], weight)
        scores[tag] = float(np.mean((model.predict(x_test)[:, 0] > THRESHOLD) == y_test[:, i]))
        logger.info("%s: %.3f", tag, scores[tag])
    return scores
