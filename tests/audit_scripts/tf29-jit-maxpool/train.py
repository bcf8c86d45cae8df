"""A classifier trained in a compiled step for speed (TF 2.9)."""
import tensorflow as tf

tf.keras.utils.set_random_seed(3)
tf.config.experimental.enable_op_determinism()
tf.config.optimizer.set_jit(True)

model = tf.keras.Sequential([
    tf.keras.layers.Conv2D(32, 3, activation="relu", input_shape=(32, 32, 3)),
    tf.keras.layers.MaxPool2D(),
    tf.keras.layers.Flatten(),
    tf.keras.layers.Dense(10),
])
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
optimizer = tf.keras.optimizers.Adam()


@tf.function(jit_compile=True)
def train_step(x, y):
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    return loss


(x_train, y_train), _ = tf.keras.datasets.cifar10.load_data()
for x, y in tf.data.Dataset.from_tensor_slices((x_train / 255.0, y_train)).batch(64):
    train_step(x, y)
