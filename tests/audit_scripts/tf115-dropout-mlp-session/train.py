"""Two-layer MLP with dropout on MNIST, TF1 graph and session."""
import tensorflow as tf
from tensorflow.examples.tutorials.mnist import input_data

mnist = input_data.read_data_sets("./mnist/data/", one_hot=True)
X = tf.placeholder(tf.float32, [None, 784])
Y = tf.placeholder(tf.float32, [None, 10])
keep = tf.placeholder(tf.float32)

W1 = tf.Variable(tf.random_normal([784, 256], stddev=0.01))
L1 = tf.nn.dropout(tf.nn.relu(tf.matmul(X, W1)), keep)
W2 = tf.Variable(tf.random_normal([256, 256], stddev=0.01))
L2 = tf.nn.dropout(tf.nn.relu(tf.matmul(L1, W2)), keep)
W3 = tf.Variable(tf.random_normal([256, 10], stddev=0.01))
logits = tf.matmul(L2, W3)

cost = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits_v2(labels=Y, logits=logits))
optimizer = tf.train.AdamOptimizer(0.001).minimize(cost)

sess = tf.Session()
sess.run(tf.global_variables_initializer())
for epoch in range(15):
    for _ in range(mnist.train.num_examples // 100):
        xs, ys = mnist.train.next_batch(100)
        _, cost_val = sess.run([optimizer, cost], feed_dict={X: xs, Y: ys, keep: 0.8})
    print(epoch, cost_val)
