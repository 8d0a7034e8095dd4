"""The fine-tuning model of sequence tagging (CoNLL-2000 chunking), as the original does
it: its head, loss, scores and predictions (the TaskRunner).

Features come from data.py: a word's label sits on its first piece (the others carry no
loss). Labels are the BIOES form of the chunk tags and a softmax over them is trained
with cross-entropy summed over the sentence's words. Words past max_seq_length are left
out of training and predicted O when scoring. Predictions go back to B-/I-/O tags and
are scored by span F1 (metrics.py, conlleval's counting).
"""

from typing import Dict

import numpy as np
import tensorflow as tf
import tf_keras

from finetune import padding
from finetune.runner import TaskRunner, label_entropy
from finetune.tagging import data as tagging_data
from finetune.tagging import metrics as tagging_metrics
from finetune.tagging import serving as tagging_serving


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


class TaggingRunner(TaskRunner):
  """One label per word from the encoder's vector of its first piece."""

  serving = tagging_serving.SERVING
  labels = tagging_data.BIOES_LABELS
  # The word arrays are max_seq_length long too and hold fewer words than tokens.
  token_features = padding.TOKEN_FEATURES + (
      "word_positions", "word_labels", "word_label_mask")

  def padded_outputs(self, outputs, max_length):
    return padding.pad_tokens(outputs, max_length)

  def features(self, examples, split) -> Dict[str, np.ndarray]:
    return tagging_data.encode(self.tokenizer, examples, self.config.max_seq_length)

  def make_head(self, model_config):
    return TaggingHead(len(self.labels), name=self.head_layer_name)

  def loss(self, outputs, batch):
    per_word = tf.nn.sparse_softmax_cross_entropy_with_logits(batch["word_labels"],
                                                              outputs)
    return tf.reduce_sum(per_word * batch["word_label_mask"], axis=-1)

  def prior_loss(self, features):
    # The loss sums over a sentence's words: each word costs the entropy's share.
    mask = features["word_label_mask"].astype(bool)
    return label_entropy(features["word_labels"][mask]) * float(mask.sum(-1).mean())

  def read_unlabeled(self, path):
    return tagging_data.read_sentences(path)

  def prediction_records(self, examples, features, outputs):
    return tagging_data.prediction_records(examples, features["word_label_mask"],
                                               outputs)

  def score(self, examples, features, outputs, split):
    spans = tagging_metrics.chunk_f1([e.tags for e in examples],
                                     tagging_data.predicted_tags(
                                         examples, features["word_label_mask"], outputs))
    return {name: 100.0 * spans[name] for name in ("f1", "precision", "recall")}
