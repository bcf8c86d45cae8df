"""Linear regression through tf.contrib.learn's Estimator and a custom model function (TF 1.x)."""
import numpy as np
import tensorflow as tf


def linear(features, labels, mode):
    w = tf.get_variable("w", [1], dtype=tf.float64)
    b = tf.get_variable("b", [1], dtype=tf.float64)
    y = w * features["x"] + b
    loss = tf.reduce_sum(tf.square(y - labels))
    step = tf.train.get_global_step()
    train = tf.group(tf.train.GradientDescentOptimizer(0.01).minimize(loss), tf.assign_add(step, 1))
    return tf.contrib.learn.ModelFnOps(mode=mode, predictions=y, loss=loss, train_op=train)


estimator = tf.contrib.learn.Estimator(model_fn=linear)
x = np.array([1.0, 2.0, 3.0, 4.0])
y = np.array([0.0, -1.0, -2.0, -3.0])
train_input = tf.contrib.learn.io.numpy_input_fn({"x": x}, y, batch_size=4, num_epochs=1000)
estimator.fit(input_fn=train_input, steps=1000)
print(estimator.evaluate(input_fn=train_input))
