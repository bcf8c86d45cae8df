"""Endless batches of (image, mask) pairs drawn at random from the ship images."""
import os

import numpy as np
from PIL import Image


def _mask(encoded, shape=(768, 768)):
    flat = np.zeros(shape[0] * shape[1], dtype=np.uint8)
    runs = [int(v) for v in encoded.split()] if isinstance(encoded, str) else []
    for start, length in zip(runs[0::2], runs[1::2]):
        flat[start - 1 : start - 1 + length] = 1
    return flat.reshape(shape).T[..., None]


def generator(folder, table, batch_size):
    while True:
        names = np.random.choice(table["ImageId"].unique(), size=batch_size)
        x = [np.asarray(Image.open(os.path.join(folder, n))) / 255.0 for n in names]
        y = [_mask(table.loc[table["ImageId"] == n, "EncodedPixels"].iloc[0]) for n in names]
        yield np.stack(x), np.stack(y)
