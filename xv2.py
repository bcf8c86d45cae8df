import tensorflow as tf
y = tf.nn.softmax_cross_entropy_with_logits_v2(labels=a, logits=b)
z = tf.compat.v1.losses.softmax_cross_entropy(a, b)
k = tf.keras.losses.CategoricalCrossentropy(from_logits=True)
