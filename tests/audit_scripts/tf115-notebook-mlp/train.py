#!/usr/bin/env python
# coding: utf-8

# In[1]:


import os

import tensorflow as tf
from tensorflow.examples.tutorials.mnist import input_data

os.environ["KMP_DUPLICATE_LIB_OK"] = "TRUE"


# In[2]:


digits = input_data.read_data_sets("data/mnist", one_hot=True)


# In[3]:


images = tf.placeholder(tf.float32, [None, 784])
targets = tf.placeholder(tf.float32, [None, 10])
hidden = tf.layers.dense(images, 300, activation=tf.nn.tanh)
probs = tf.layers.dense(hidden, 10, activation=tf.nn.softmax)
xent = tf.reduce_mean(-tf.reduce_sum(targets * tf.log(probs + 1e-9), axis=1))
step = tf.train.AdamOptimizer(1e-3).minimize(xent)


# In[ ]:


with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for epoch in range(50):
        xs, ys = digits.train.next_batch(128)
        _, value = sess.run([step, xent], feed_dict={images: xs, targets: ys})
        print(epoch, value)
