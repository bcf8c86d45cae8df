"""CIFAR-10 with a custom training loop over the GPUs of one machine (MirroredStrategy, TF 2.15)."""
import tensorflow as tf

strategy = tf.distribute.MirroredStrategy()
PER_REPLICA = 32
GLOBAL_BATCH = PER_REPLICA * strategy.num_replicas_in_sync

(train_x, train_y), (test_x, test_y) = tf.keras.datasets.cifar10.load_data()
train_x, test_x = train_x / 255.0, test_x / 255.0

train_ds = tf.data.Dataset.from_tensor_slices((train_x, train_y)).shuffle(len(train_x)).batch(GLOBAL_BATCH)
test_ds = tf.data.Dataset.from_tensor_slices((test_x, test_y)).batch(GLOBAL_BATCH)
train_dist = strategy.experimental_distribute_dataset(train_ds)
test_dist = strategy.experimental_distribute_dataset(test_ds)

with strategy.scope():
    net = tf.keras.Sequential([
        tf.keras.layers.Conv2D(32, 3, activation="relu"),
        tf.keras.layers.MaxPooling2D(),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(10),
    ])
    optimizer = tf.keras.optimizers.Adam()
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True,
                                                            reduction=tf.keras.losses.Reduction.NONE)


def replica_step(batch):
    images, labels = batch
    with tf.GradientTape() as tape:
        logits = net(images, training=True)
        loss = tf.nn.compute_average_loss(loss_fn(labels, logits), global_batch_size=GLOBAL_BATCH)
    grads = tape.gradient(loss, net.trainable_variables)
    optimizer.apply_gradients(zip(grads, net.trainable_variables))
    return loss


@tf.function
def train_step(batch):
    losses = strategy.run(replica_step, args=(batch,))
    return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)


for epoch in range(3):
    total = 0.0
    for batch in train_dist:
        total += train_step(batch)
    print(epoch, float(total))
