import tensorflow as tf
ds = ds.map(f, num_parallel_calls=4, deterministic=False).batch(8)
