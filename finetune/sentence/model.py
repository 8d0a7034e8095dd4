"""The fine-tuning model of sentence and sentence-pair tasks (GLUE, users' own): the head
on [CLS], its loss (cross-entropy, or a regression's squared error as STS-B's), scores
and predictions (the TaskRunner), and GLUE's submission files.
"""

import os
from typing import Sequence

import numpy as np
import tensorflow as tf
import tf_keras

from finetune import prior_watch
from finetune.runner import TaskRunner, label_entropy
from finetune.sentence import data as sentence_data
from finetune.sentence import deployed
from finetune.sentence import metrics as sentence_metrics
from finetune.sentence import serving as sentence_serving
from finetune.sentence.data import SentenceExample, SentenceTask
from util.files import atomic_write


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


def write_glue_submission(task: SentenceTask, split: str,
                          examples: Sequence[SentenceExample], predictions: Sequence,
                          out_dir: str) -> str:
  """Writes test predictions as GLUE's server takes them (index, prediction); its path.
  `predictions` are label ids (classification) or scores (regression, clipped to the
  task's range), in the order of `examples`."""
  path = os.path.join(out_dir, task.submission_files[split])
  with atomic_write(path) as f:
    f.write("index\tprediction\n")
    for example, prediction in zip(examples, predictions):
      if task.is_regression:
        low, high = task.label_range or (float("-inf"), float("inf"))
        prediction = f"{min(max(float(prediction), low), high):.3f}"
      else:
        prediction = task.labels[int(prediction)]
      f.write(f"{example.eid}\t{prediction}\n")
  return path


class SentenceRunner(TaskRunner):
  """Classification and regression of one sentence or a sentence pair (GLUE, users')."""

  serving = sentence_serving.SERVING

  def prepare_examples(self, examples, split):
    if split == self.task.train_split and self.task.symmetric and \
        self.config.sections["sentence"].double_unordered:
      return sentence_data.both_orders(examples)  # MRPC, STS-B: both orders
    return examples

  def features(self, examples, split):
    out = sentence_data.encode(self.tokenizer, examples, self.config.max_seq_length)
    if any(e.label is None for e in examples):
      out["label"] = np.zeros(len(examples), np.float32)
    elif self.task.is_regression:
      out["label"] = np.array([float(e.label) for e in examples], np.float32)
    else:
      out["label"] = np.array([self.task.labels.index(e.label) for e in examples],
                              np.float32)
    return out

  def make_head(self, model_config):
    outputs = 1 if self.task.is_regression else len(self.task.labels)
    return SentenceHead(outputs, model_config.hidden_dropout_prob,
                        name=self.head_layer_name)

  def loss(self, outputs, batch):
    label = batch["label"]
    if self.task.is_regression:
      return tf.square(outputs - label)
    # Rows of other tasks may hold any value: only this task's rows are kept.
    ids = tf.clip_by_value(tf.cast(label, tf.int32), 0, len(self.task.labels) - 1)
    return tf.nn.sparse_softmax_cross_entropy_with_logits(ids, outputs)

  def prior_loss(self, features):
    labels = features["label"]
    if self.task.is_regression:
      return float(labels.var())  # squared error of predicting the mean
    return label_entropy(labels)

  def prior_words(self):
    return prior_watch.REGRESSION if self.task.is_regression else prior_watch.CLASSES

  def predictions(self, outputs) -> np.ndarray:
    return outputs if self.task.is_regression else outputs.argmax(-1)

  def score(self, examples, features, outputs, split):
    return sentence_metrics.score(self.task.metrics, features["label"], self.predictions(outputs))

  def read_unlabeled(self, path):
    name, layout = sentence_data.unlabeled_layout(self.task, path)
    return sentence_data.iter_file(self.task, layout, path,
                                    f"{self.task.name} {name}", True, skipped=[])

  def prediction_records(self, examples, features, outputs):
    if self.task.is_regression:
      outputs = {"score": outputs}
    else:
      probabilities = tf.nn.softmax(outputs).numpy()
      outputs = {"probabilities": probabilities, "label_id": probabilities.argmax(-1)}
    return deployed.prediction_records(self.task.labels, [e.eid for e in examples],
                                       outputs)

  def write_predictions(self, examples, features, outputs, split, out_dir):
    if split not in self.task.submission_files:  # a user's task: JSON lines
      return super().write_predictions(examples, features, outputs, split, out_dir)
    return [write_glue_submission(
        self.task, split, examples, list(self.predictions(outputs)), out_dir)]
