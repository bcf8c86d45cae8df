"""Label smoothing noise drawn per replica from tf.random generators in a MirroredStrategy loop (TF 2.18)."""
import tensorflow as tf

tf.keras.utils.set_random_seed(21)
tf.config.experimental.enable_op_determinism()
strategy = tf.distribute.MirroredStrategy()
BATCH = 16 * strategy.num_replicas_in_sync

with strategy.scope():
    smoother = tf.random.Generator.from_seed(21)
    head = tf.keras.Sequential([tf.keras.layers.Dense(10)])
    optimizer = tf.keras.optimizers.Adam(1e-3)

tf.random.set_global_generator(tf.random.Generator.from_seed(4))


def replica_step(features, onehot):
    soft = onehot * 0.9 + 0.1 * smoother.uniform(tf.shape(onehot))
    drop = tf.random.get_global_generator().uniform(tf.shape(features)) > 0.1
    with tf.GradientTape() as tape:
        logits = head(tf.where(drop, features, 0.0))
        loss = tf.nn.compute_average_loss(
            tf.nn.softmax_cross_entropy_with_logits(soft, logits), global_batch_size=BATCH)
    grads = tape.gradient(loss, head.trainable_variables)
    optimizer.apply_gradients(zip(grads, head.trainable_variables))
    return loss


@tf.function
def train_step(features, onehot):
    return strategy.reduce("SUM", strategy.run(replica_step, args=(features, onehot)), axis=None)


data = tf.data.Dataset.from_tensor_slices(
    (tf.random.normal((128, 20), seed=1), tf.one_hot(tf.range(128) % 10, 10))).shuffle(128, seed=8).batch(BATCH)
for f, y in strategy.experimental_distribute_dataset(data):
    train_step(f, y)
