"""The fine-tuning model of sequence tagging, as the original does it: its head, loss,
scores and predictions (the TaggingRunner). A softmax over the labels at each word's
first piece, trained with cross-entropy summed over each window's words; predictions
scored as conlleval scores entities (the per-type figures in
results/<tasks>_tagging/<task>_<split>_eval.json), or by word accuracy.
"""

import json
import logging
import os
from typing import Dict

import numpy as np
import tensorflow as tf
import tf_keras

from finetune import padding
from finetune.runner import TaskRunner, label_entropy
from finetune.tagging import data as tagging_data
from finetune.tagging import metrics as tagging_metrics
from finetune.tagging import serving as tagging_serving
from util.files import atomic_write


class TaggingHead(tf_keras.layers.Layer):
  """[B, L, num_labels] float32 logits at each word's first piece (batch word_positions)."""

  def __init__(self, num_labels: int, **kwargs):
    super().__init__(**kwargs)
    self.dense = tf_keras.layers.Dense(num_labels, name="dense")

  def call(self, sequence_output, batch, training=None):
    words = tf.gather(sequence_output, batch["word_positions"], batch_dims=1)
    return tf.cast(self.dense(words), tf.float32)


class TaggingRunner(TaskRunner):
  """One label per word from the encoder's vector of its first piece."""

  serving = tagging_serving.SERVING
  # The word arrays are max_seq_length long too and hold fewer words than tokens.
  token_features = padding.TOKEN_FEATURES + (
      "word_positions", "word_labels", "word_label_mask")

  def __init__(self, task, config, tokenizer):
    super().__init__(task, config, tokenizer)
    self._said_openings = False  # the note on entities that open with I- (once a run)

  @property
  def labels(self):
    return self.task.labels

  @property
  def stride(self) -> int:
    """The run's tagging_stride (finetune/tagging/family.py TaggingSettings)."""
    return self.config.sections["tagging"].tagging_stride

  def padded_outputs(self, outputs, max_length):
    return padding.pad_tokens(outputs, max_length)

  def features(self, examples, split) -> Dict[str, np.ndarray]:
    length = self.config.max_seq_length
    features = tagging_data.windows(self.tokenizer, examples, length, self.stride,
                                    self.task)
    tagging_data.windows_note(examples, features, f"{self.task.name} {split}", length,
                              self.stride)
    return features

  def make_head(self, model_config):
    return TaggingHead(len(self.labels), name=self.head_layer_name)

  def loss(self, outputs, batch):
    per_word = tf.nn.sparse_softmax_cross_entropy_with_logits(batch["word_labels"],
                                                              outputs)
    return tf.reduce_sum(per_word * batch["word_label_mask"], axis=-1)

  def prior_loss(self, features):
    # The loss sums over a window's words: each word costs the entropy's share.
    mask = features["word_label_mask"].astype(bool)
    return label_entropy(features["word_labels"][mask]) * float(mask.sum(-1).mean())

  def read_unlabeled(self, path):
    return tagging_data.read_sentences(path)

  def prediction_records(self, examples, features, outputs):
    return tagging_data.prediction_records(examples, features, outputs,
                                           self.task.output_tags, self.task.scheme != "none")

  def score(self, examples, features, outputs, split):
    gold = [tagging_data.as_output_tags(self.task, e.tags) for e in examples]
    predicted = tagging_data.predicted_tags(examples, features, outputs,
                                            self.task.output_tags)
    if "f1" in self.task.metrics:
      self._say_openings(split, [e.tags for e in examples], predicted)
      path = os.path.join(self.config.results_dir, f"{self.config.tasks_label}_tagging",
                          f"{self.task.name.replace('/', '_')}_{split}_eval.json")
      with atomic_write(path) as f:
        json.dump(tagging_metrics.entity_scores(gold, predicted), f, indent=2,
                  ensure_ascii=False)
    return tagging_metrics.score(self.task.metrics, gold, predicted)

  def _say_openings(self, split, gold, predicted):
    """Says once a run that entities opening with I- (or E-) count, as conlleval counts
    them: predicted ones, and gold ones where the scheme opens entities with B-."""
    def opening(sentences):
      return sum(tags[first][0] in "IE" for tags in sentences
                 for _, first, _ in tagging_metrics.entity_spans(tags))
    counts = (opening(predicted), opening(gold) if self.task.scheme != "iob1" else 0)
    if any(counts) and not self._said_openings:
      self._said_openings = True
      logging.warning("%s %s: %d predicted and %d gold entities open with I- or E- (no "
                      "entity of their type open before them): each counts as an entity "
                      "from that word, as conlleval counts it", self.task.name, split,
                      *counts)
