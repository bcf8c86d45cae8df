"""Bag-of-words classifier, TF 1.x graph mode: embedding lookups summed per document."""
import os

import numpy as np
import tensorflow as tf

os.environ["TF_CUDNN_USE_AUTOTUNE"] = "0"
os.environ["TF_CUDNN_DETERMINISTIC"] = "1"

VOCAB, DIM, DOCS = 5000, 64, 128

word_ids = tf.placeholder(tf.int32, [None])
doc_ids = tf.placeholder(tf.int32, [None])
labels = tf.placeholder(tf.int32, [DOCS])
embeddings = tf.get_variable("emb", [VOCAB, DIM])
vectors = tf.gather(embeddings, word_ids)
docs = tf.math.unsorted_segment_sum(vectors, doc_ids, num_segments=DOCS)
logits = tf.layers.dense(docs, 2)
loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss)

order = np.arange(10000)
np.random.shuffle(order)

with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for step in range(10):
        words = order[step * 100:(step + 1) * 100] % VOCAB
        owners = np.sort(np.random.randint(0, DOCS, size=100))
        sess.run(train_op, {word_ids: words, doc_ids: owners, labels: np.zeros(DOCS, np.int32)})
