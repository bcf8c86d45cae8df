"""Linear regression fitted eagerly with GradientTape (TF 1.x eager)."""
import tensorflow as tf

tf.enable_eager_execution()

N = 1000
xs = tf.random_normal([N])
ys = xs * 3 + 2 + tf.random_normal([N])
w = tf.Variable(5.0)
b = tf.Variable(10.0)


def mse():
    return tf.reduce_mean(tf.square(xs * w + b - ys))


for step in range(200):
    with tf.GradientTape() as tape:
        value = mse()
    dw, db = tape.gradient(value, [w, b])
    w.assign_sub(0.01 * dw)
    b.assign_sub(0.01 * db)
print(w.numpy(), b.numpy())
