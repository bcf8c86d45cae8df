"""A custom loop across workers with every distributed setting pinned (TF 2.18): nothing to report."""
import tensorflow as tf

tf.keras.utils.set_random_seed(1234)
tf.config.experimental.enable_op_determinism()

strategy = tf.distribute.MultiWorkerMirroredStrategy(
    communication_options=tf.distribute.experimental.CommunicationOptions(
        implementation=tf.distribute.experimental.CommunicationImplementation.RING))
GLOBAL_BATCH = 64


def dataset_fn(context):
    batch = context.get_per_replica_batch_size(GLOBAL_BATCH)
    (images, labels), _ = tf.keras.datasets.mnist.load_data()
    ds = tf.data.Dataset.from_tensor_slices((images / 255.0, labels))
    ds = ds.shard(context.num_input_pipelines, context.input_pipeline_id)
    return ds.shuffle(60000, seed=1234).repeat().batch(batch)


with strategy.scope():
    model = tf.keras.Sequential([tf.keras.layers.Flatten(), tf.keras.layers.Dense(10)])
    optimizer = tf.keras.optimizers.SGD(0.01)

dist_data = strategy.distribute_datasets_from_function(dataset_fn)


def replica_step(inputs):
    x, y = inputs
    with tf.GradientTape() as tape:
        per_example = tf.keras.losses.sparse_categorical_crossentropy(y, model(x), from_logits=True)
        loss = tf.nn.compute_average_loss(per_example, global_batch_size=GLOBAL_BATCH)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss


@tf.function
def train_step(iterator):
    return strategy.run(replica_step, args=(next(iterator),))


iterator = iter(dist_data)
for _ in range(100):
    train_step(iterator)
