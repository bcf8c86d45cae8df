"""Build the baseline tree network (the training lives in the framework)."""
import numpy as np
import tensorflow as tf
from tensorflow.examples.tutorials.mnist import input_data

from framework.layers import LayerFactory
from framework.tree import TreeNetwork


def baseline(network, node):
    x = network.add_input(node, "data")
    conv1 = LayerFactory.conv(node, x, filters=[5, 5, 1, 20], pooling=[1, 2, 2, 1])
    conv2 = LayerFactory.conv(node, conv1, filters=[5, 5, 20, 50], pooling=[1, 2, 2, 1])
    flat = tf.reshape(conv2, [-1, 7 * 7 * 50])
    LayerFactory.dense(node, flat, shape=[7 * 7 * 50, 500])


def main():
    data = input_data.read_data_sets("MNIST_data", one_hot=False)
    net = TreeNetwork(dataset=data, degree=np.int32(2), builders=[baseline])
    net.build_network()


main()
