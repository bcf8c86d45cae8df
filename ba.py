import tensorflow as tf
y = tf.nn.bias_add(x, b)
