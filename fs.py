import tensorflow as tf
tf.config.experimental.enable_op_determinism()
model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
model.compile(loss="mse")
model.fit(x, y)
