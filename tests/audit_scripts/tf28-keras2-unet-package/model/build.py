"""A small U-Net (Keras 2)."""
from keras import models
from keras.layers import Conv2D, Input, MaxPooling2D, UpSampling2D, concatenate
from keras.optimizers import Adam


def _double(x, filters):
    x = Conv2D(filters, 3, activation="relu", padding="same")(x)
    return Conv2D(filters, 3, activation="relu", padding="same")(x)


def Unet(input_shape=(256, 256, 3)):
    inputs = Input(input_shape)
    c1 = _double(inputs, 8)
    c2 = _double(MaxPooling2D(2)(c1), 16)
    c3 = _double(MaxPooling2D(2)(c2), 32)
    u2 = concatenate([c2, UpSampling2D(2)(c3)], axis=3)
    c4 = _double(u2, 16)
    u1 = concatenate([c1, UpSampling2D(2)(c4)], axis=3)
    c5 = _double(u1, 8)
    model = models.Model(inputs=[inputs], outputs=[Conv2D(1, 1, activation="sigmoid")(c5)])
    model.compile(optimizer=Adam(1e-4), loss="binary_crossentropy", metrics=["accuracy"])
    return model
