"""The head of tagging: a label distribution at each word's first word-piece."""

import tensorflow as tf
import tf_keras


class TaggingHead(tf_keras.layers.Layer):
  """[B, L, num_labels] float32 logits at each word's first piece (batch word_positions)."""

  def __init__(self, num_labels: int, **kwargs):
    super().__init__(**kwargs)
    self.num_labels = num_labels
    self.dense = tf_keras.layers.Dense(num_labels, name="dense")

  def call(self, sequence_output, batch, training=None):
    words = tf.gather(sequence_output, batch["word_positions"], batch_dims=1)
    return tf.cast(self.dense(words), tf.float32)

  def get_config(self):
    return {**super().get_config(), "num_labels": self.num_labels}
