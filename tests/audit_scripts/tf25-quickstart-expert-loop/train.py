"""A subclassed convnet trained with a GradientTape step (TF 2 quickstart for experts)."""
import tensorflow as tf
from tensorflow.keras import Model
from tensorflow.keras.layers import Conv2D, Dense, Flatten


class Net(Model):
    def __init__(self):
        super().__init__()
        self.conv = Conv2D(32, 3, activation="relu")
        self.flat = Flatten()
        self.hidden = Dense(128, activation="relu")
        self.out = Dense(10)

    def call(self, x):
        return self.out(self.hidden(self.flat(self.conv(x))))


(x_train, y_train), (x_test, y_test) = tf.keras.datasets.mnist.load_data()
x_train = (x_train / 255.0)[..., tf.newaxis].astype("float32")
x_test = (x_test / 255.0)[..., tf.newaxis].astype("float32")
train_ds = tf.data.Dataset.from_tensor_slices((x_train, y_train)).shuffle(1000).batch(32)
test_ds = tf.data.Dataset.from_tensor_slices((x_test, y_test)).batch(32)

net = Net()
loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
optimizer = tf.keras.optimizers.Adam()
train_loss = tf.keras.metrics.Mean()


@tf.function
def train_step(images, labels):
    with tf.GradientTape() as tape:
        loss = loss_object(labels, net(images, training=True))
    grads = tape.gradient(loss, net.trainable_variables)
    optimizer.apply_gradients(zip(grads, net.trainable_variables))
    train_loss(loss)


for epoch in range(5):
    train_loss.reset_states()
    for images, labels in train_ds:
        train_step(images, labels)
    print(epoch + 1, float(train_loss.result()))
