"""Horovod data parallelism with a GradientTape loop (TF 2)."""
import tensorflow as tf
import horovod.tensorflow as hvd

hvd.init()
gpus = tf.config.experimental.list_physical_devices("GPU")
for gpu in gpus:
    tf.config.experimental.set_memory_growth(gpu, True)
if gpus:
    tf.config.experimental.set_visible_devices(gpus[hvd.local_rank()], "GPU")

(images, labels), _ = tf.keras.datasets.mnist.load_data()
dataset = tf.data.Dataset.from_tensor_slices((images[..., None] / 255.0, labels)).repeat().batch(128)

net = tf.keras.Sequential([
    tf.keras.layers.Conv2D(32, 3, activation="relu"),
    tf.keras.layers.MaxPooling2D(),
    tf.keras.layers.Dropout(0.25),
    tf.keras.layers.Flatten(),
    tf.keras.layers.Dense(10, activation="softmax"),
])
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy()
opt = tf.keras.optimizers.Adam(1e-3 * hvd.size())


@tf.function
def step(x, y, first):
    with tf.GradientTape() as tape:
        loss = loss_fn(y, net(x, training=True))
    tape = hvd.DistributedGradientTape(tape)
    grads = tape.gradient(loss, net.trainable_variables)
    opt.apply_gradients(zip(grads, net.trainable_variables))
    if first:
        hvd.broadcast_variables(net.variables, root_rank=0)
        hvd.broadcast_variables(opt.variables(), root_rank=0)
    return loss


for i, (x, y) in enumerate(dataset.take(10000 // hvd.size())):
    value = step(x, y, i == 0)
