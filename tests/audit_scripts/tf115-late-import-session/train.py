from tensorflow.examples.tutorials.mnist import input_data

mnist = input_data.read_data_sets("MNIST_data", one_hot=True)

import numpy as np
import tensorflow as tf

images = tf.placeholder(tf.float32, [None, 784])
onehot = tf.placeholder(tf.float32, [None, 10])


def layer(inputs, n_in, n_out, act=None):
    weights = tf.Variable(tf.random_normal([n_in, n_out]))
    bias = tf.Variable(tf.zeros([1, n_out]) + 0.1)
    out = tf.matmul(inputs, weights) + bias
    return out if act is None else act(out)


probs = layer(images, 784, 10, act=tf.nn.softmax)
loss = tf.reduce_mean(-tf.reduce_sum(onehot * tf.log(probs), axis=[1]))
train_op = tf.train.GradientDescentOptimizer(0.5).minimize(loss)

sess = tf.Session()
sess.run(tf.global_variables_initializer())
for i in range(1000):
    bx, by = mnist.train.next_batch(100)
    _, value = sess.run([train_op, loss], feed_dict={images: bx, onehot: by})
print(np.float32(value))
