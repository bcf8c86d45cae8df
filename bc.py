import tensorflow as tf
y = tf.math.bincount(a, weights=w)
