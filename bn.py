import tensorflow as tf
bn = tf.keras.layers.BatchNormalization()
y = bn(x, training=False)
