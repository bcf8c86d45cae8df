"""CIFAR-10 on a ResNet50 from keras.applications, augmentation mapped over batches (Keras 3)."""
import keras
import tensorflow as tf

for gpu in tf.config.experimental.list_physical_devices("GPU"):
    tf.config.experimental.set_memory_growth(gpu, True)

augment = keras.Sequential([
    keras.layers.RandomFlip("horizontal"),
    keras.layers.RandomRotation(0.1),
    keras.layers.RandomZoom(0.1),
])
(x_train, y_train), _ = keras.datasets.cifar10.load_data()
train = tf.data.Dataset.from_tensor_slices((x_train, y_train)).batch(64).map(lambda x, y: (augment(x), y))

inputs = keras.Input(shape=x_train.shape[1:])
backbone = keras.applications.ResNet50(weights=None, input_shape=x_train.shape[1:], classes=10)
model = keras.Model(inputs, backbone(keras.layers.Rescaling(1.0 / 255)(inputs)))
model.compile(optimizer="rmsprop", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
model.fit(train, epochs=5)
