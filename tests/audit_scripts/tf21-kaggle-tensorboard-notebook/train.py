#!/usr/bin/env python
# coding: utf-8

# # TensorBoard inside a Kaggle kernel
#
# The extension only shows output in an interactive session.

# In[1]:


get_ipython().run_line_magic('load_ext', 'tensorboard')
get_ipython().run_line_magic('tensorboard', '--logdir runs')


# In[2]:


import tensorflow as tf

(x_train, y_train), (x_test, y_test) = tf.keras.datasets.fashion_mnist.load_data()
x_train, x_test = x_train / 255.0, x_test / 255.0
model = tf.keras.models.Sequential([
    tf.keras.layers.Flatten(input_shape=(28, 28)),
    tf.keras.layers.Dense(256, activation="relu"),
    tf.keras.layers.Dropout(0.3),
    tf.keras.layers.Dense(10, activation="softmax"),
])
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])


# In[3]:


board = tf.keras.callbacks.TensorBoard("runs")
model.fit(x_train, y_train, epochs=5, validation_data=(x_test, y_test), callbacks=[board])
