"""The head of sentence tasks: one vector per sequence to class logits or a score."""

import tensorflow as tf
import tf_keras


class SentenceHead(tf_keras.layers.Layer):
  """Dropout + dense on the [CLS] vector: [B, num_labels] logits, or [B] for regression.

  The original's get_pooled_output is sequence_output[:, 0] (no pooler layer) and its
  tf.layers.dense kernel is glorot-uniform.
  """

  def __init__(self, num_outputs: int, dropout_rate: float = 0.1, **kwargs):
    super().__init__(**kwargs)
    self.num_outputs = num_outputs
    self.dropout = tf_keras.layers.Dropout(dropout_rate)
    self.dense = tf_keras.layers.Dense(num_outputs, name="dense")

  def call(self, sequence_output, batch=None, training=None):
    x = self.dense(self.dropout(sequence_output[:, 0], training=training))
    x = tf.cast(x, tf.float32)
    return tf.squeeze(x, -1) if self.num_outputs == 1 else x

  def get_config(self):
    return {**super().get_config(), "num_outputs": self.num_outputs,
            "dropout_rate": self.dropout.rate}
