import numpy
import tensorflow as tf

# seeds for every module of the package
numpy.random.seed(7)
tf.random.set_seed(2)
