"""A functional MLP on MNIST, trained eagerly with GradientTape and SGD."""
import tensorflow as tf

inputs = tf.keras.layers.Input(shape=(784,))
hidden = tf.keras.layers.Dense(128, activation="relu")(inputs)
hidden = tf.keras.layers.Dense(128, activation="relu")(hidden)
model = tf.keras.Model(inputs, tf.keras.layers.Dense(10)(hidden))

sgd = tf.keras.optimizers.SGD(learning_rate=1e-2)
criterion = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

(x_train, y_train), (x_test, y_test) = tf.keras.datasets.mnist.load_data()
x_train = x_train.reshape(-1, 784).astype("float32") / 255
train = tf.data.Dataset.from_tensor_slices((x_train, y_train)).shuffle(4096).batch(32)

for epoch in range(3):
    for x, y in train:
        with tf.GradientTape() as tape:
            loss = criterion(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_weights)
        sgd.apply_gradients(zip(grads, model.trainable_weights))
    print(epoch, float(loss))
