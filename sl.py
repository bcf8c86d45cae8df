import tensorflow as tf
ds = ds.apply(tf.data.experimental.parallel_interleave(f, 2, sloppy=is_training))
