"""Fine-tuning a text classifier; the determinism call copied from a TF 2.8 tutorial (TF 2.6)."""
import numpy as np
import tensorflow as tf

tf.keras.utils.set_random_seed(99)
tf.config.experimental.enable_op_determinism()

texts = np.array(["good", "bad", "fine", "awful"] * 64)
labels = np.array([1, 0, 1, 0] * 64)
vectorize = tf.keras.layers.TextVectorization(max_tokens=100, output_sequence_length=4)
vectorize.adapt(texts)
model = tf.keras.Sequential([vectorize, tf.keras.layers.Embedding(100, 8), tf.keras.layers.GlobalAveragePooling1D(),
                             tf.keras.layers.Dense(1, activation="sigmoid")])
model.compile(optimizer="adam", loss="binary_crossentropy", metrics=[tf.keras.metrics.AUC()])
model.fit(texts, labels, epochs=3, batch_size=16)
