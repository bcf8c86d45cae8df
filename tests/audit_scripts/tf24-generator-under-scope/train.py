"""Noisy-input training on two GPUs with tf.random.Generator (TF 2.4), as the random-numbers guide of its time shows."""
import tensorflow as tf

tf.random.set_seed(3)
mirrored = tf.distribute.MirroredStrategy(devices=["/gpu:0", "/gpu:1"])

with mirrored.scope():
    jitter = tf.random.Generator.from_seed(11)
    model = tf.keras.Sequential([tf.keras.layers.Dense(16, activation="relu"), tf.keras.layers.Dense(1)])
    opt = tf.keras.optimizers.SGD(0.05)

per_replica_gens = tf.random.get_global_generator().split(2)


def noisy_step(x, y):
    noise = tf.random.Generator.from_seed(5).normal(tf.shape(x), stddev=0.01)
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(x + noise) - y))
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    return loss


@tf.function
def step(x, y):
    return mirrored.run(noisy_step, args=(x, y))


xs = tf.random.normal((64, 4), seed=1)
ys = tf.random.normal((64, 1), seed=2)
dist = mirrored.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices((xs, ys)).batch(16))
for batch_x, batch_y in dist:
    step(batch_x, batch_y)
