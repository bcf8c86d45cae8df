"""Pickled glyph pairs as Estimator input."""
import pickle

import numpy as np
import tensorflow as tf


def _load(path):
    pairs = []
    with open(path, "rb") as fh:
        while True:
            try:
                pairs.append(pickle.load(fh))
            except EOFError:
                return pairs


def _mismatched(source, target, batch):
    def gen():
        while True:
            idx = np.random.randint(len(source), size=batch)
            shuffled = target[idx].copy()
            np.random.shuffle(shuffled)
            yield {"source": source[idx], "target": shuffled}

    return gen


def input_fn(path, shuffle=True, num_epochs=None, batch=8, paired=True):
    pairs = _load(path)
    source = np.stack([p[0] for p in pairs]).astype(np.float32)
    target = np.stack([p[1] for p in pairs]).astype(np.float32)
    if paired:
        return tf.estimator.inputs.numpy_input_fn(
            x={"source": source, "target": target}, y=None, shuffle=shuffle, num_epochs=num_epochs, batch_size=batch
        )
    shape = (batch, *source.shape[1:])

    def unpaired():
        data = tf.data.Dataset.from_generator(
            _mismatched(source, target, batch),
            output_types={"source": tf.float32, "target": tf.float32},
            output_shapes={"source": shape, "target": shape},
        )
        return data.make_one_shot_iterator().get_next()

    return unpaired
