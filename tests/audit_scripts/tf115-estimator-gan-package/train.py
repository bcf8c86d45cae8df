"""Trains the font-transfer network with an Estimator (TF 1.x); the model and input live in model/."""
import argparse

import tensorflow as tf

from model.dataset import input_fn
from model.net import model_fn

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=2e-4)
parser.add_argument("--steps", type=int, default=2000)
args = parser.parse_args()

tf.logging.set_verbosity(tf.logging.INFO)
estimator = tf.estimator.Estimator(model_fn=model_fn, params={"lr": args.lr}, model_dir="runs/transfer")
estimator.train(input_fn=input_fn("data/train.obj"), max_steps=args.steps)

for i, out in enumerate(estimator.predict(input_fn=input_fn("data/val.obj", shuffle=False, num_epochs=1))):
    print(i, out["generated"].shape)
