"""Input pipeline, model function and training of the MNIST trainer."""
import tensorflow as tf


def _parse(record):
    spec = {"label": tf.FixedLenFeature([], tf.int64), "image": tf.FixedLenFeature([], tf.string)}
    parsed = tf.parse_single_example(record, spec)
    image = tf.cast(tf.decode_raw(parsed["image"], tf.uint8), tf.float32) / 255.0
    return {"pixels": tf.reshape(image, [784])}, tf.one_hot(parsed["label"], 10)


def input_fn(pattern, flags, mode):
    ds = tf.data.TFRecordDataset(tf.gfile.Glob(pattern))
    if mode == tf.estimator.ModeKeys.TRAIN:
        ds = ds.shuffle(flags.shuffle_buffer, seed=2).repeat()
    ds = ds.map(_parse, num_parallel_calls=4)
    return ds.batch(flags.batch_size).prefetch(1)


def model_fn(features, labels, mode):
    net = tf.keras.Sequential([
        tf.keras.layers.Dense(512, activation="relu", input_dim=784),
        tf.keras.layers.Dropout(0.2),
        tf.keras.layers.Dense(10),
    ])
    logits = net(features["pixels"], training=mode == tf.estimator.ModeKeys.TRAIN)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"classes": tf.argmax(logits, 1)})
    loss = tf.losses.softmax_cross_entropy(onehot_labels=labels, logits=logits)
    if mode == tf.estimator.ModeKeys.EVAL:
        return tf.estimator.EstimatorSpec(mode, loss=loss)
    train_op = tf.train.AdamOptimizer(0.001).minimize(loss, global_step=tf.train.get_or_create_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def train_and_evaluate(flags):
    strategy = tf.contrib.distribute.OneDeviceStrategy("device:CPU:0")
    config = tf.estimator.RunConfig(train_distribute=strategy, model_dir=flags.model_dir, save_checkpoints_steps=20)
    estimator = tf.estimator.Estimator(model_fn=model_fn, config=config)
    train_spec = tf.estimator.TrainSpec(
        input_fn=lambda: input_fn(flags.train_files, flags, tf.estimator.ModeKeys.TRAIN), max_steps=1000
    )
    eval_spec = tf.estimator.EvalSpec(input_fn=lambda: input_fn(flags.eval_files, flags, tf.estimator.ModeKeys.EVAL))
    tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)
