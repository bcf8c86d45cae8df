"""Iris with tf.contrib.learn's DNNClassifier (TF 1.x): a fixed train/test split, trained with fit()."""
import tensorflow as tf
from sklearn import metrics
from sklearn.model_selection import train_test_split

iris = tf.contrib.learn.datasets.load_dataset("iris")
x_train, x_test, y_train, y_test = train_test_split(iris.data, iris.target, test_size=0.2, random_state=42)
columns = tf.contrib.learn.infer_real_valued_columns_from_input(x_train)
classifier = tf.contrib.learn.DNNClassifier(feature_columns=columns, hidden_units=[10, 20, 10], n_classes=3)
classifier.fit(x_train, y_train, steps=200)
predicted = list(classifier.predict(x_test, as_iterable=True))
print(metrics.accuracy_score(y_test, predicted))
