"""Softmax regression on MNIST in a TF1 session (codelab style)."""
import tensorflow as tf
from tensorflow.examples.tutorials.mnist import input_data

mnist = input_data.read_data_sets("MNIST_data", one_hot=True, reshape=False)

X = tf.placeholder(tf.float32, [None, 28, 28, 1])
Y_ = tf.placeholder(tf.float32, [None, 10])
W = tf.Variable(tf.zeros([784, 10]))
b = tf.Variable(tf.zeros([10]))
Y = tf.nn.softmax(tf.matmul(tf.reshape(X, [-1, 784]), W) + b)
cross_entropy = -tf.reduce_sum(Y_ * tf.log(Y))
correct = tf.equal(tf.argmax(Y, 1), tf.argmax(Y_, 1))
accuracy = tf.reduce_mean(tf.cast(correct, tf.float32))
train_step = tf.train.GradientDescentOptimizer(0.003).minimize(cross_entropy)

sess = tf.Session()
sess.run(tf.global_variables_initializer())
for i in range(1000):
    batch_X, batch_Y = mnist.train.next_batch(100)
    sess.run(train_step, feed_dict={X: batch_X, Y_: batch_Y})
    if i % 100 == 0:
        print(i, sess.run([accuracy, cross_entropy], feed_dict={X: batch_X, Y_: batch_Y}))
