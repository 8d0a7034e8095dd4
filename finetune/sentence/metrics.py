"""Evaluation metrics of sentence tasks, implemented once in NumPy.

Sentence-level metrics (accuracy, binary F1, Matthews correlation, Pearson and Spearman
correlation); chunk F1 lives with tagging. Each function returns a fraction in [0, 1] (or
[-1, 1] for correlations); `score` turns a task's metric names into the percentages that
results files report, as the original does.

Degenerate inputs follow sklearn's convention of answering 0 rather than NaN: Matthews
correlation with a constant prediction or constant gold labels is 0 (as sklearn), F1 with
no positive prediction and no positive label is 0 (as sklearn's default zero_division),
and Pearson/Spearman with a constant side are 0 (scipy answers NaN there; 0 keeps medians
over trials and model selection well defined).
"""

from typing import Dict, Sequence, Tuple

import numpy as np


def _paired(labels, predictions) -> Tuple[np.ndarray, np.ndarray]:
  labels, predictions = np.asarray(labels), np.asarray(predictions)
  if labels.ndim != 1 or labels.shape != predictions.shape:
    raise ValueError(f"metrics need two 1-D sequences of equal length, got shapes "
                     f"{labels.shape} and {predictions.shape}")
  if labels.size == 0:
    raise ValueError("metrics need at least one example, got none")
  return labels, predictions


def accuracy(labels, predictions) -> float:
  labels, predictions = _paired(labels, predictions)
  return float(np.mean(labels == predictions))


def f1(labels, predictions, positive=1) -> float:
  """F1 of the positive class (binary tasks: MRPC, QQP)."""
  labels, predictions = _paired(labels, predictions)
  gold, predicted = labels == positive, predictions == positive
  true_pos = np.sum(gold & predicted)
  denominator = np.sum(gold) + np.sum(predicted)
  return float(2 * true_pos / denominator) if denominator else 0.0


def matthews_corrcoef(labels, predictions) -> float:
  """Matthews correlation, multi-class form (Gorodkin's R_K) as sklearn computes it."""
  labels, predictions = _paired(labels, predictions)
  classes, encoded = np.unique(np.concatenate([labels, predictions]), return_inverse=True)
  gold, predicted = encoded[:labels.size], encoded[labels.size:]
  confusion = np.zeros((classes.size, classes.size), np.float64)
  np.add.at(confusion, (gold, predicted), 1)
  gold_totals, predicted_totals = confusion.sum(axis=1), confusion.sum(axis=0)
  correct, total = np.trace(confusion), confusion.sum()
  covariance = correct * total - gold_totals @ predicted_totals
  gold_variance = total ** 2 - gold_totals @ gold_totals
  predicted_variance = total ** 2 - predicted_totals @ predicted_totals
  if gold_variance * predicted_variance == 0:
    return 0.0
  return float(covariance / np.sqrt(gold_variance * predicted_variance))


def pearson(labels, predictions) -> float:
  labels, predictions = _paired(labels, predictions)
  x = labels.astype(np.float64) - labels.mean(dtype=np.float64)
  y = predictions.astype(np.float64) - predictions.mean(dtype=np.float64)
  norms = np.sqrt(x @ x) * np.sqrt(y @ y)
  if norms == 0:
    return 0.0
  return float(np.clip((x @ y) / norms, -1.0, 1.0))


def average_ranks(values) -> np.ndarray:
  """1-based ranks where tied values share the mean of their ranks (scipy's 'average')."""
  values = np.asarray(values)
  order = np.argsort(values, kind="stable")
  ordered = values[order]
  starts_new_value = np.concatenate([[True], ordered[1:] != ordered[:-1]])
  group_of_sorted = np.cumsum(starts_new_value) - 1
  group_bounds = np.append(np.flatnonzero(starts_new_value), values.size)
  # A group occupying sorted positions [lo, hi) holds ranks lo+1 .. hi; their mean:
  group_rank = (group_bounds[:-1] + 1 + group_bounds[1:]) / 2.0
  ranks = np.empty(values.size, np.float64)
  ranks[order] = group_rank[group_of_sorted]
  return ranks


def spearman(labels, predictions) -> float:
  labels, predictions = _paired(labels, predictions)
  return pearson(average_ranks(labels), average_ranks(predictions))


SENTENCE_METRICS = {
    "accuracy": accuracy,
    "f1": f1,
    "mcc": matthews_corrcoef,
    "pearson": pearson,
    "spearman": spearman,
}


def score(metric_names: Sequence[str], labels, predictions) -> Dict[str, float]:
  """Percentages for each named metric, e.g. {"accuracy": 84.1, "f1": 88.9}."""
  unknown = [name for name in metric_names if name not in SENTENCE_METRICS]
  if unknown:
    raise ValueError(f"unknown metric {unknown[0]!r}; known: "
                     f"{', '.join(sorted(SENTENCE_METRICS))}")
  return {name: 100.0 * SENTENCE_METRICS[name](labels, predictions)
          for name in metric_names}
