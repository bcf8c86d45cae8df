"""The generator/critic model_fn."""
import tensorflow as tf


def _conv(x, filters, stride, name):
    with tf.variable_scope(name):
        x = tf.layers.conv2d(x, filters, 3, stride, "same")
        x = tf.layers.batch_normalization(x)
        return tf.nn.elu(x)


def _up(x, filters, name):
    with tf.variable_scope(name):
        return tf.layers.conv2d_transpose(x, filters, 3, 2, "same")


def _critic(image, reuse):
    with tf.variable_scope("critic", reuse=reuse):
        h = _conv(image, 8, 2, "c1")
        h = _conv(h, 16, 2, "c2")
        return tf.layers.dense(tf.layers.flatten(h), 1)


def model_fn(features, labels, mode, params):
    e1 = _conv(features["source"], 32, 1, "e1")
    e2 = _conv(e1, 64, 2, "e2")
    e3 = _conv(e2, 128, 2, "e3")
    d1 = _conv(tf.concat([e2, _up(e3, 64, "u1")], axis=3), 64, 1, "d1")
    d2 = _conv(tf.concat([e1, _up(d1, 32, "u2")], axis=3), 32, 1, "d2")
    logits = tf.layers.conv2d(d2, 1, 1, 1, "same")
    generated = tf.nn.sigmoid(logits)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"generated": generated})
    real = _critic(features["target"], reuse=False)
    fake = _critic(generated, reuse=True)
    d_loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(logits=real, labels=tf.ones_like(real)))
    d_loss += tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(logits=fake, labels=tf.zeros_like(fake)))
    g_loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(logits=logits, labels=features["target"]))
    step = tf.train.get_global_step()
    train_op = tf.train.AdamOptimizer(params["lr"]).minimize(d_loss + g_loss, global_step=step)
    return tf.estimator.EstimatorSpec(mode, loss=d_loss + g_loss, train_op=train_op)
