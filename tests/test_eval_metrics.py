"""pretrain/eval_metrics.py against sklearn and NumPy on random batches."""

import numpy as np
import pytest
import tensorflow as tf
from sklearn import metrics as skm

from pretrain.eval_metrics import DISC_METRICS, MLM_METRICS, PretrainingMetrics


def random_outputs(rng, batch=6, seq=12, n=4, vocab=5):
  lengths = rng.integers(3, seq + 1, size=batch)
  input_mask = (np.arange(seq)[None] < lengths[:, None]).astype(np.int32)
  labels = (rng.random((batch, seq)) < 0.3).astype(np.int32) * input_mask
  # Probabilities that carry some signal, so the AUC is not trivially 0.5.
  probs = np.clip(0.25 * labels + 0.75 * rng.random((batch, seq)), 0, 1).astype(
      np.float32)
  weights = (rng.random((batch, n)) < 0.7).astype(np.float32)
  return {
      "masked_lm_ids": rng.integers(0, vocab, (batch, n)).astype(np.int32),
      "masked_lm_preds": rng.integers(0, vocab, (batch, n)).astype(np.int32),
      "sampled_ids": rng.integers(0, vocab, (batch, n)).astype(np.int32),
      "masked_lm_weights": weights,
      "masked_lm_token_loss": rng.random((batch, n)).astype(np.float32) * 3,
      "input_mask": input_mask,
      "disc_labels": labels,
      "disc_probs": probs,
      "disc_preds": (probs > 0.5).astype(np.int32),
      "disc_logits": np.log(probs / (1 - probs + 1e-7) + 1e-7),
      "disc_example_loss": rng.random(batch).astype(np.float32),
  }


def thresholded_roc_auc(labels, scores, num_thresholds=200):
  """tf.compat.v1.metrics.auc's definition: fixed thresholds, trapezoidal rule."""
  eps = 1e-7
  thresholds = np.array([-eps] + [(i + 1) / (num_thresholds - 1)
                                  for i in range(num_thresholds - 2)] + [1 + eps])
  above = scores[None, :] > thresholds[:, None]
  pos = labels[None, :] == 1
  tp = np.sum(above & pos, 1)
  fp = np.sum(above & ~pos, 1)
  fn = np.sum(~above & pos, 1)
  tn = np.sum(~above & ~pos, 1)
  tpr = tp / (tp + fn)
  fpr = fp / (fp + tn)
  return np.sum((fpr[:-1] - fpr[1:]) * (tpr[:-1] + tpr[1:]) / 2)


def test_metrics_match_sklearn_over_batches():
  rng = np.random.default_rng(0)
  batches = [random_outputs(rng) for _ in range(4)]
  metrics = PretrainingMetrics()
  update = tf.function(metrics.update)
  for batch in batches:
    update({k: tf.constant(v) for k, v in batch.items()})
  result = metrics.result()
  assert set(result) == set(MLM_METRICS + DISC_METRICS)

  cat = {k: np.concatenate([b[k].reshape(-1) for b in batches]) for k in batches[0]}
  w = cat["masked_lm_weights"]
  assert result["masked_lm_accuracy"] == pytest.approx(
      skm.accuracy_score(cat["masked_lm_ids"], cat["masked_lm_preds"], sample_weight=w),
      rel=1e-5)
  assert result["sampled_masked_lm_accuracy"] == pytest.approx(
      skm.accuracy_score(cat["masked_lm_ids"], cat["sampled_ids"], sample_weight=w),
      rel=1e-5)
  assert result["masked_lm_loss"] == pytest.approx(
      np.average(cat["masked_lm_token_loss"], weights=w), rel=1e-5)
  assert result["disc_loss"] == pytest.approx(np.mean(cat["disc_example_loss"]),
                                              rel=1e-5)

  real = cat["input_mask"] == 1
  labels, preds = cat["disc_labels"][real], cat["disc_preds"][real]
  assert result["disc_accuracy"] == pytest.approx(skm.accuracy_score(labels, preds),
                                                  rel=1e-5)
  assert result["disc_precision"] == pytest.approx(skm.precision_score(labels, preds),
                                                   rel=1e-5)
  assert result["disc_recall"] == pytest.approx(skm.recall_score(labels, preds),
                                                rel=1e-5)
  assert result["disc_replaced_rate"] == pytest.approx(labels.mean(), rel=1e-5)
  # AUC over all positions, padding as (label 0, score 0), as the original.
  auc_labels = cat["disc_labels"] * cat["input_mask"]
  auc_scores = cat["disc_probs"] * cat["input_mask"]
  assert result["disc_auc"] == pytest.approx(
      thresholded_roc_auc(auc_labels, auc_scores), abs=1e-5)
  assert result["disc_auc"] == pytest.approx(skm.roc_auc_score(auc_labels, auc_scores),
                                             abs=0.01)


def test_mlm_only_outputs_and_reset():
  rng = np.random.default_rng(1)
  batch = random_outputs(rng)
  mlm_only = {k: batch[k] for k in ("masked_lm_ids", "masked_lm_preds",
                                    "masked_lm_weights", "masked_lm_token_loss")}
  metrics = PretrainingMetrics()
  metrics.update(mlm_only)
  result = metrics.result()
  assert set(result) == set(MLM_METRICS)
  assert result["masked_lm_loss"] == pytest.approx(
      np.average(batch["masked_lm_token_loss"], weights=batch["masked_lm_weights"]),
      rel=1e-5)
  metrics.reset()
  assert metrics.result() == {"masked_lm_accuracy": 0.0, "masked_lm_loss": 0.0}
