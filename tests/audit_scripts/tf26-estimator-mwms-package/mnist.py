"""The model function: a small Keras convnet inside an Estimator."""
import tensorflow as tf

LEARNING_RATE = 1e-4
BATCH = 64


def model_fn(features, labels, mode):
    net = tf.keras.Sequential([
        tf.keras.layers.Conv2D(32, 3, activation="relu", input_shape=(28, 28, 1)),
        tf.keras.layers.MaxPooling2D(),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(64, activation="relu"),
        tf.keras.layers.Dense(10),
    ])
    logits = net(features, training=False)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"logits": logits})
    per_example = tf.keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction=tf.keras.losses.Reduction.NONE
    )(labels, logits)
    loss = tf.reduce_sum(per_example) / BATCH
    if mode == tf.estimator.ModeKeys.EVAL:
        return tf.estimator.EstimatorSpec(mode, loss=loss)
    sgd = tf.compat.v1.train.GradientDescentOptimizer(learning_rate=LEARNING_RATE)
    return tf.estimator.EstimatorSpec(
        mode, loss=loss, train_op=sgd.minimize(loss, tf.compat.v1.train.get_or_create_global_step())
    )
