"""What the fine-tuning trainer asks of a task type, and the sentence-task implementation.

A runner turns a task's examples into fixed-size feature arrays, provides its head,
its per-example loss, and turns the head's outputs on a split back into scores and
prediction files. The trainer (finetune/trainer.py) pools several tasks' features,
trains one encoder with every head, and calls back here; QA and tagging runners follow
the same interface.
"""

import importlib
from typing import Dict, Iterator, List

import numpy as np
import tensorflow as tf
import tf_keras

from finetune import classification, metrics, qa, tagging
from finetune.config import FinetuningConfig
from finetune.sentence_features import encode
from model.config import ModelConfig

# The split name under which a user's file is featurized for --predict.
PREDICT_SPLIT = "predict"
# The diagnostic set is predicted by the MNLI classifier.
SHARED_HEADS = {"glue/ax": "glue/mnli"}


class TaskRunner:
  """Base class: one task of a fine-tuning run."""

  def __init__(self, task, config: FinetuningConfig, tokenizer):
    self.task, self.config, self.tokenizer = task, config, tokenizer

  @property
  def head_name(self) -> str:
    return SHARED_HEADS.get(self.task.name, self.task.name)

  def prepare_examples(self, examples: list, split: str) -> list:
    """The examples a split is featurized from (e.g. augmented for training)."""
    return examples

  def features(self, examples: list, split: str) -> Dict[str, np.ndarray]:
    """Arrays with a leading example axis: input_ids, input_mask, segment_ids and the
    task's own targets; a feature may stand for part of an example (QA windows)."""
    raise NotImplementedError

  def make_head(self, model_config: ModelConfig) -> tf_keras.layers.Layer:
    """A layer called as head(sequence_output, batch, training=...)."""
    raise NotImplementedError

  def loss(self, outputs, batch) -> tf.Tensor:
    """Per-feature float32 loss [B] (the trainer keeps this task's rows)."""
    raise NotImplementedError

  def score(self, examples: list, features: Dict[str, np.ndarray], outputs,
            split: str) -> Dict[str, float]:
    """Metrics in percent for a labelled split, from the head's numpy outputs."""
    raise NotImplementedError

  def write_predictions(self, examples: list, features: Dict[str, np.ndarray], outputs,
                        split: str, out_dir: str) -> List[str]:
    """Prediction files for a split (test sets, or a dev set's details); their paths."""
    return []

  def read_unlabeled(self, path: str) -> Iterator:
    """Examples of a user's file to predict, in the task's input format without
    labels, read as they come."""
    raise NotImplementedError

  def prediction_records(self, examples: list, features: Dict[str, np.ndarray],
                         outputs) -> List[Dict[str, object]]:
    """One JSON-ready prediction per example, from the head's numpy outputs."""
    raise NotImplementedError


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


class SentenceRunner(TaskRunner):
  """Classification and regression of one sentence or a sentence pair (GLUE, users')."""

  def prepare_examples(self, examples, split):
    if split == self.task.train_split and self.task.symmetric and \
        self.config.double_unordered:
      return classification.both_orders(examples)  # MRPC, STS-B: both orders
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
                        name="task_specific/" + self.head_name.replace("/", "_"))

  def loss(self, outputs, batch):
    label = batch["label"]
    if self.task.is_regression:
      return tf.square(outputs - label)
    # Rows of other tasks may hold any value: only this task's rows are kept.
    ids = tf.clip_by_value(tf.cast(label, tf.int32), 0, len(self.task.labels) - 1)
    return tf.nn.sparse_softmax_cross_entropy_with_logits(ids, outputs)

  def predictions(self, outputs) -> np.ndarray:
    return outputs if self.task.is_regression else outputs.argmax(-1)

  def score(self, examples, features, outputs, split):
    return metrics.score(self.task.metrics, features["label"], self.predictions(outputs))

  def read_unlabeled(self, path):
    name, layout = classification.unlabeled_layout(self.task)
    return classification.iter_file(self.task, layout, path,
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
    if split not in self.task.submission_files:
      return []
    return [classification.write_glue_submission(
        self.task, split, examples, list(self.predictions(outputs)), out_dir)]


def runner_for(task, config: FinetuningConfig, tokenizer) -> TaskRunner:
  """The runner of a task's type (registered in RUNNERS)."""
  for task_type, runner in RUNNERS.items():
    if isinstance(task, task_type):
      if isinstance(runner, str):  # "module:Class", imported on first use
        module, name = runner.split(":")
        runner = getattr(importlib.import_module(module), name)
      return runner(task, config, tokenizer)
  raise ValueError(f"task {task.name}: no fine-tuning runner for "
                   f"{type(task).__name__} tasks yet")


# The QA and tagging runners build on this module, so they are named, not imported.
RUNNERS = {classification.SentenceTask: SentenceRunner,
           qa.QATask: "finetune.qa_runner:QARunner",
           tagging.TaggingTask: "finetune.tagging_runner:TaggingRunner"}
