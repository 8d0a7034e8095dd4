"""Pre-training eval metrics, with the original's definitions (its `metric_fn`).

- masked_lm_accuracy / sampled_masked_lm_accuracy: argmax / sampled token == original
  token, weighted by masked_lm_weights.
- masked_lm_loss: per-position -log p(original), mean weighted by masked_lm_weights.
- disc_loss: mean over examples of each example's mean loss over its real tokens.
- disc_auc: ROC AUC over EVERY position, padding included as label 0 with probability 0
  (the original multiplies labels and probabilities by input_mask), with 200 thresholds
  and the trapezoidal rule, like tf.compat.v1.metrics.auc: the original's figure, so
  kept as it computes it, streamed in the step (across replicas) rather than exact.
- disc_accuracy / disc_precision / disc_recall: accuracy of the 0/1 predictions weighted
  by input_mask, by preds * input_mask, and by labels * input_mask respectively.
- disc_replaced_rate (new, not in the original): the fraction of real tokens that were
  replaced, the discriminator's base rate: a discriminator that learned nothing scores
  as explain_results (pretrain/trainer.py) says, disc_loss near the rate's entropy.

The original's disc_auc is measured against the model's own generator, so it falls as the
generator gets better; two new figures do not move with it (FixedCorruptionMetrics, from
the objective's eval_outputs; docs/pretraining.md defines them): disc_auc_fixed and
disc_state_cosine.
"""

from typing import Dict, List

import numpy as np
import tensorflow as tf
import tf_keras

MLM_METRICS = ("masked_lm_accuracy", "masked_lm_loss")
DISC_METRICS = ("sampled_masked_lm_accuracy", "disc_loss", "disc_auc", "disc_accuracy",
                "disc_precision", "disc_recall", "disc_replaced_rate")


def _flat(x, dtype=tf.float32):
  return tf.reshape(tf.cast(x, dtype), [-1])


class PretrainingMetrics:
  """Streaming eval metrics over the outputs of an objective's step (`compute`)."""

  def __init__(self):
    # Weighted accuracies are weighted means of 0/1 "correct" values.
    self._metrics = {name: tf_keras.metrics.Mean(name=name)
                     for name in MLM_METRICS + DISC_METRICS if name != "disc_auc"}
    self._metrics["disc_auc"] = tf_keras.metrics.AUC(num_thresholds=200, name="disc_auc")

  def update(self, outputs: Dict[str, tf.Tensor]):
    """Adds one batch; `outputs` as the objective's `compute` returns them."""
    m = self._metrics
    weights = _flat(outputs["masked_lm_weights"])
    targets = _flat(outputs["masked_lm_ids"], tf.int32)

    def accuracy(predictions):
      return tf.cast(tf.equal(_flat(predictions, tf.int32), targets), tf.float32)

    m["masked_lm_accuracy"].update_state(accuracy(outputs["masked_lm_preds"]), weights)
    m["masked_lm_loss"].update_state(_flat(outputs["masked_lm_token_loss"]), weights)
    if "disc_logits" not in outputs:
      return
    m["sampled_masked_lm_accuracy"].update_state(accuracy(outputs["sampled_ids"]),
                                                 weights)
    m["disc_loss"].update_state(_flat(outputs["disc_example_loss"]))
    input_mask = _flat(outputs["input_mask"])
    labels = _flat(outputs["disc_labels"])
    preds = _flat(outputs["disc_preds"])
    m["disc_auc"].update_state(labels * input_mask, _flat(outputs["disc_probs"]) *
                               input_mask)
    correct = tf.cast(tf.equal(labels, preds), tf.float32)
    m["disc_accuracy"].update_state(correct, input_mask)
    m["disc_precision"].update_state(correct, preds * input_mask)
    m["disc_recall"].update_state(correct, labels * input_mask)
    m["disc_replaced_rate"].update_state(labels, input_mask)

  def result(self) -> Dict[str, float]:
    """Current values, as Python floats (call outside tf.function)."""
    names = MLM_METRICS
    if self._metrics["disc_loss"].count > 0:  # discriminator outputs were seen
      names += DISC_METRICS
    return {name: float(self._metrics[name].result()) for name in names}


def roc_auc(labels: np.ndarray, scores: np.ndarray) -> float:
  """Exact ROC AUC (scikit-learn's: tied scores count half, the Mann-Whitney statistic);
  NaN when only one class is present."""
  labels = np.asarray(labels).reshape(-1) > 0
  if labels.all() or not labels.any():
    return float("nan")
  # Imported at the first evaluation, as finetune/sentence/metrics.py: not every command.
  from sklearn.metrics import roc_auc_score  # pylint: disable=g-import-not-at-top
  return float(roc_auc_score(labels, np.asarray(scores).reshape(-1)))


class FixedCorruptionMetrics:
  """disc_auc_fixed and disc_state_cosine over batches of the objective's
  eval_outputs, gathered on the host (an exact AUC needs every score)."""

  def __init__(self):
    self._labels: List[np.ndarray] = []
    self._scores: List[np.ndarray] = []
    self._state_sum = 0.0
    self._state_count = 0

  def update(self, outputs: Dict[str, np.ndarray]):
    """Adds one replica's batch (NumPy values of the objective's eval_outputs)."""
    keep = np.asarray(outputs["fixed_weights"]).reshape(-1) > 0
    self._labels.append(np.asarray(outputs["fixed_labels"]).reshape(-1)[keep])
    self._scores.append(np.asarray(outputs["fixed_logits"]).reshape(-1)[keep])
    self._state_sum = self._state_sum + np.asarray(outputs["state_sum"], np.float64)
    self._state_count += int(outputs["state_count"])

  def result(self) -> Dict[str, float]:
    if not self._labels:
      return {}
    n = self._state_count
    # Mean cosine over the n (n - 1) ordered pairs of distinct unit vectors:
    # (|sum|^2 - n) / (n (n - 1)), without forming the pairs. The float32 unit vectors'
    # norms miss 1 by rounding, so collapsed states can read 1 + 1e-7: capped at 1.
    cosine = (min(1.0, (float(np.dot(self._state_sum, self._state_sum)) - n) /
                  (n * (n - 1))) if n > 1 else float("nan"))
    return {"disc_auc_fixed": roc_auc(np.concatenate(self._labels),
                                      np.concatenate(self._scores)),
            "disc_state_cosine": cosine}
