"""Multi-worker training of an Estimator (TF_CONFIG names the cluster)."""
import tensorflow_datasets as tfds
import tensorflow as tf

import mnist

tf.compat.v1.disable_eager_execution()

BUFFER = 10000
BATCH = 64


def input_fn(mode, input_context=None):
    splits = tfds.load(name="mnist", as_supervised=True)
    ds = splits["train"] if mode == tf.estimator.ModeKeys.TRAIN else splits["test"]
    if input_context:
        ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    ds = ds.map(lambda image, label: (tf.cast(image, tf.float32) / 255.0, label))
    return ds.cache().shuffle(BUFFER).batch(BATCH)


strategy = tf.distribute.experimental.MultiWorkerMirroredStrategy()
config = tf.estimator.RunConfig(train_distribute=strategy)
estimator = tf.estimator.Estimator(model_fn=mnist.model_fn, model_dir="/tmp/multiworker", config=config)
tf.estimator.train_and_evaluate(
    estimator,
    train_spec=tf.estimator.TrainSpec(input_fn=input_fn),
    eval_spec=tf.estimator.EvalSpec(input_fn=input_fn),
)
