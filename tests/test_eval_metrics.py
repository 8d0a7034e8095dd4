"""pretrain/eval_metrics.py against sklearn, NumPy and pair counts, on random batches."""

import numpy as np
import pytest
import tensorflow as tf
from sklearn import metrics as skm

from pretrain.eval_metrics import (DISC_METRICS, MLM_METRICS, FixedCorruptionMetrics,
                                   PretrainingMetrics, roc_auc)


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


def test_mlm_only_outputs():
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


def pair_count_auc(labels, scores):
  """The Mann-Whitney statistic by its definition: of every (positive, negative) pair,
  the fraction the positive scores above, ties counting half."""
  positives, negatives = scores[labels == 1], scores[labels == 0]
  above = positives[:, None] > negatives[None, :]
  tied = positives[:, None] == negatives[None, :]
  return (above.sum() + 0.5 * tied.sum()) / (len(positives) * len(negatives))


def test_exact_roc_auc_counts_pairs_with_ties_half():
  # Positives 0.9 and 0.3 against negatives 0.9, 0.1 and 0.5: 0.9 wins two pairs and
  # ties one, 0.3 wins one: (3 + 0.5) / 6.
  assert roc_auc([1, 0, 1, 0, 0], [0.9, 0.9, 0.3, 0.1, 0.5]) == pytest.approx(3.5 / 6)
  rng = np.random.default_rng(3)
  labels = (rng.random(3000) < 0.15).astype(np.int32)
  scores = np.round(0.3 * labels + rng.normal(size=3000), 1)  # many ties
  assert roc_auc(labels, scores) == pytest.approx(pair_count_auc(labels, scores),
                                                  abs=1e-12)
  assert roc_auc(labels, np.zeros(3000)) == pytest.approx(0.5)
  assert np.isnan(roc_auc(np.zeros(10), rng.random(10)))
  assert np.isnan(roc_auc(np.ones(10), rng.random(10)))


def test_fixed_corruption_metrics_over_batches():
  """The AUC over candidate positions only, and the mean cosine over every pair of
  token states, against explicit pairwise NumPy computations."""
  rng = np.random.default_rng(4)
  metrics, labels, scores, states = FixedCorruptionMetrics(), [], [], []
  for _ in range(3):
    weights = (rng.random((4, 10)) < 0.7).astype(np.float32)
    fixed_labels = (rng.random((4, 10)) < 0.2).astype(np.int32)
    logits = (fixed_labels + rng.normal(size=(4, 10))).astype(np.float32)
    # Non-candidate positions carry labels and logits that must not count.
    logits[weights == 0] = 100.0
    fixed_labels[weights == 0] = 1
    unit = rng.normal(size=(int(weights.sum()), 6)) + 2.0
    unit /= np.linalg.norm(unit, axis=1, keepdims=True)
    metrics.update({"fixed_logits": logits, "fixed_labels": fixed_labels,
                    "fixed_weights": weights, "state_sum": unit.sum(0),
                    "state_count": np.int32(len(unit))})
    keep = weights.reshape(-1) > 0
    labels.append(fixed_labels.reshape(-1)[keep])
    scores.append(logits.reshape(-1)[keep])
    states.append(unit)
  result = metrics.result()
  assert result["disc_auc_fixed"] == pytest.approx(
      pair_count_auc(np.concatenate(labels), np.concatenate(scores)), abs=1e-12)
  states = np.concatenate(states)
  cosines = states @ states.T
  n = len(states)
  assert result["disc_state_cosine"] == pytest.approx(
      (cosines.sum() - np.trace(cosines)) / (n * (n - 1)), abs=1e-9)
