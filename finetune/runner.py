"""What the fine-tuning trainer asks of a task family: the TaskRunner interface (each
family's model.py implements it): features, head, loss, scores, predictions."""

import json
import os
from typing import Dict, Iterator, List, Optional, Tuple

import numpy as np
import tensorflow as tf
import tf_keras

from finetune import padding, prior_watch
from model.config import ModelConfig
from util.files import atomic_write

# The split name under which a user's file is featurized for --predict.
PREDICT_SPLIT = "predict"
# The diagnostic set is predicted by the MNLI classifier.
SHARED_HEADS = {"glue/ax": "glue/mnli"}


def scope_name(name: str) -> str:
  """`name` as TensorFlow takes it in a scope, layer or signature name: "/" as "_", and
  each other character outside [A-Za-z0-9_.-] as "_u" and its code point in hex, so
  that names in any script stay apart (a task named "영화평" has the head
  "task_specific/_uc601_ud654_ud3c9")."""
  return "".join("_" if char == "/" else char if char.isascii() and (
      char.isalnum() or char in "_.-") else f"_u{ord(char):04x}" for char in name)


def label_entropy(labels: np.ndarray) -> float:
  """Cross-entropy, in nats, of predicting every label by the labels' frequencies."""
  _, counts = np.unique(labels, return_counts=True)
  p = counts / counts.sum()
  return float(-(p * np.log(p)).sum())


class TaskRunner:
  """One task of a fine-tuning run."""

  # The features with a token axis (axis 1, max_seq_length long) that a batch is cut
  # at (finetune/padding.py).
  token_features: Tuple[str, ...] = padding.TOKEN_FEATURES
  # The shortest a cut batch may be: the head's own need (QA's beam of start positions).
  shortest_batch: int = 1
  # The family's serving (finetune/serving.py Serving: the SavedModel's function, raw
  # strings in, what prediction_records says out; the token-ids exports' declaration).
  serving = None

  def __init__(self, task, config, tokenizer):
    self.task, self.config, self.tokenizer = task, config, tokenizer

  @property
  def head_name(self) -> str:
    return SHARED_HEADS.get(self.task.name, self.task.name)

  def padded_outputs(self, outputs, max_length: int):
    """The head's outputs of a cut batch (finetune/padding.py) with each token-axis
    output padded back to max_length, where a padded batch's reader would find it."""
    return outputs

  @property
  def head_layer_name(self) -> str:
    """The name of the head's Keras layer (its variables' scope)."""
    return "task_specific/" + scope_name(self.head_name)

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

  def prior_loss(self, features: Dict[str, np.ndarray]) -> Optional[float]:
    """The mean loss on these training features of the best prediction that ignores
    the text (the label frequencies; a regression's mean), or None where the family
    has no such baseline (finetune/prior_watch.py compares the training loss with it)."""
    del features
    return None

  def prior_words(self) -> Tuple[str, str]:
    """prior_loss's baseline as prior_watch's line words it (its CLASSES, REGRESSION)."""
    return prior_watch.CLASSES

  def score(self, examples: list, features: Dict[str, np.ndarray], outputs,
            split: str) -> Dict[str, float]:
    """Metrics in percent for a labelled split, from the head's numpy outputs."""
    raise NotImplementedError

  def write_predictions(self, examples: list, features: Dict[str, np.ndarray], outputs,
                        split: str, out_dir: str) -> List[str]:
    """Prediction files for a split (test sets, or a dev set's details); their paths.
    By default one JSON line per example, as --predict writes them (a family with a
    submission format of its own writes that instead)."""
    path = os.path.join(out_dir, f"{self.task.name.replace('/', '_')}_{split}.jsonl")
    with atomic_write(path) as f:
      for record in self.prediction_records(examples, features, outputs):
        f.write(json.dumps(record, ensure_ascii=False) + "\n")
    return [path]

  def read_unlabeled(self, path: str) -> Iterator:
    """Examples of a user's file to predict, in the task's input format without
    labels, read as they come."""
    raise NotImplementedError

  def prediction_records(self, examples: list, features: Dict[str, np.ndarray],
                         outputs) -> List[Dict[str, object]]:
    """One JSON-ready prediction per example, from the head's numpy outputs."""
    raise NotImplementedError
