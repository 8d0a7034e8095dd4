"""The fine-tuning runner of sentence and sentence-pair tasks (GLUE, users' own).

Features come from finetune/sentence/features.py, the head from finetune/sentence/head.py;
the loss is cross-entropy (or squared error for regression, as STS-B), scores are
finetune/sentence/metrics.py's, and test predictions become GLUE submission files.
"""

import numpy as np
import tensorflow as tf

from finetune import prior_watch
from finetune.runner import TaskRunner, label_entropy
from finetune.sentence import files as sentence_files
from finetune.sentence.submission import write_glue_submission
from finetune.sentence.task import both_orders
from finetune.sentence import metrics as sentence_metrics
from finetune.sentence.features import encode
from finetune.sentence.head import SentenceHead
from finetune.sentence import serving as sentence_serving


class SentenceRunner(TaskRunner):
  """Classification and regression of one sentence or a sentence pair (GLUE, users')."""

  serving = sentence_serving.SERVING

  def prepare_examples(self, examples, split):
    if split == self.task.train_split and self.task.symmetric and \
        self.config.section("sentence").double_unordered:
      return both_orders(examples)  # MRPC, STS-B: both orders
    return examples

  def features(self, examples, split):
    out = encode(self.tokenizer, examples, self.config.max_seq_length)
    if any(e.label is None for e in examples):
      out["label"] = np.zeros(len(examples), np.float32)
    elif self.task.is_regression:
      out["label"] = np.array([float(e.label) for e in examples], np.float32)
    else:
      out["label"] = np.array([self.task.label_id(e.label) for e in examples], np.float32)
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
    name, layout = sentence_files.unlabeled_layout(self.task, path)
    return sentence_files.iter_file(self.task, layout, path,
                                    f"{self.task.name} {name}", True, skipped=[])

  def prediction_records(self, examples, features, outputs):
    if self.task.is_regression:
      return [{"index": e.eid, "score": float(score)}
              for e, score in zip(examples, outputs)]
    probabilities = tf.nn.softmax(outputs).numpy()
    return [{"index": e.eid, "label": self.task.labels[int(p.argmax())],
             "probabilities": dict(zip(self.task.labels, map(float, p)))}
            for e, p in zip(examples, probabilities)]

  def write_predictions(self, examples, features, outputs, split, out_dir):
    if split not in self.task.submission_files:  # a user's task: JSON lines
      return super().write_predictions(examples, features, outputs, split, out_dir)
    return [write_glue_submission(
        self.task, split, examples, list(self.predictions(outputs)), out_dir)]
