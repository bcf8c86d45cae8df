"""Entry point of the trainer package (python -m trainer.task)."""
import shutil

import tensorflow as tf

from . import model

flags = tf.app.flags
flags.DEFINE_string("train_files", "", "TFRecord pattern of the training set")
flags.DEFINE_string("eval_files", "", "TFRecord pattern of the evaluation set")
flags.DEFINE_string("model_dir", "ckpt/", "checkpoint directory")
flags.DEFINE_integer("batch_size", 128, "batch size")
flags.DEFINE_integer("shuffle_buffer", 1280, "shuffle buffer size")
FLAGS = flags.FLAGS


def main(_):
    shutil.rmtree(FLAGS.model_dir, ignore_errors=True)
    model.train_and_evaluate(FLAGS)


if __name__ == "__main__":
    tf.app.run()
