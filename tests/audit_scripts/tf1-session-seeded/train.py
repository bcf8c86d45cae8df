"""Linear regression with a TF1 session: seeded, but no determinism switch."""
import numpy as np
import tensorflow as tf

tf.set_random_seed(20180130)
np.random.seed(20180130)

x = tf.placeholder(tf.float32, [None])
y = tf.placeholder(tf.float32, [None])
w = tf.Variable(tf.zeros([1]))
b = tf.Variable(tf.zeros([1]))
loss = tf.reduce_mean(tf.square(x * w + b - y))
train_op = tf.train.AdamOptimizer(1e-4).minimize(loss)

with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for step in range(100):
        xs = np.random.rand(32).astype(np.float32)
        _, cost = sess.run([train_op, loss], feed_dict={x: xs, y: 2 * xs + 1})
        if step % 10 == 0:
            print(step, cost)
