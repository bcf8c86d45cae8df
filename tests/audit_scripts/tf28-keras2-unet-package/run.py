"""Trains the U-Net on the ship images and saves it."""
import pandas as pd

from model.build import Unet
from preprocess.generator import generator

table = pd.read_csv("data/segmentations.csv")
train_gen = generator("data/ships", table, 5)
val_gen = generator("data/ships", table, 5)
model = Unet(input_shape=(768, 768, 3))
model.fit_generator(train_gen, steps_per_epoch=32, epochs=5, validation_data=val_gen, validation_steps=1)
model.save("unet.h5")
