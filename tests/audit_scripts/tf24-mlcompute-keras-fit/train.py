from tensorflow import keras
from tensorflow.python.framework.ops import disable_eager_execution

disable_eager_execution()

try:
    from tensorflow.python.compiler.mlcompute import mlcompute

    mlcompute.set_mlc_device(device_name="gpu")
except ImportError:
    pass

(train_images, train_labels), (test_images, test_labels) = keras.datasets.fashion_mnist.load_data()
train_images, test_images = train_images / 255.0, test_images / 255.0

model = keras.Sequential([
    keras.layers.Flatten(input_shape=(28, 28)),
    keras.layers.Dense(1024, activation="relu"),
    keras.layers.Dense(1024, activation="relu"),
    keras.layers.Dense(10, activation="softmax"),
])
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
model.fit(train_images, train_labels, epochs=1, batch_size=32)
