"""Segmentation training with stateless augmentation (TF 2.8)."""
import tensorflow as tf

tf.keras.utils.set_random_seed(0)
tf.config.experimental.enable_op_determinism()


def augment(image, mask, seed):
    image = tf.image.stateless_random_flip_left_right(image, seed)
    mask = tf.image.stateless_random_flip_left_right(mask, seed)
    return image, mask


counter = tf.data.experimental.Counter()
pairs = tf.data.Dataset.from_tensor_slices((tf.zeros([64, 128, 128, 3]), tf.zeros([64, 128, 128, 1])))
train = tf.data.Dataset.zip((pairs, tf.data.Dataset.zip((counter, counter))))
train = train.map(lambda p, s: augment(p[0], p[1], s), num_parallel_calls=tf.data.AUTOTUNE).batch(8)

inputs = tf.keras.Input((128, 128, 3))
x = tf.keras.layers.Conv2D(16, 3, padding="same", activation="relu")(inputs)
x = tf.keras.layers.UpSampling2D(interpolation="bilinear")(tf.keras.layers.MaxPooling2D()(x))
outputs = tf.keras.layers.Conv2D(1, 1, activation="sigmoid")(x)
model = tf.keras.Model(inputs, outputs)
model.compile(optimizer="adam", loss="binary_crossentropy")
model.fit(train, epochs=2)
