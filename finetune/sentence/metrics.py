"""Evaluation metrics of sentence tasks, from scikit-learn and SciPy.

Sentence-level metrics (accuracy, binary F1, Matthews correlation, Pearson and Spearman
correlation); chunk F1 lives with tagging. Each function returns a fraction in [0, 1] (or
[-1, 1] for correlations); `score` turns a task's metric names into the percentages that
results files report, as the original does.

Degenerate inputs answer 0 rather than NaN: Matthews correlation with a constant
prediction or constant gold labels is 0 (sklearn's answer), F1 with no positive
prediction and no positive label is 0 (sklearn's zero_division=0), and Pearson/Spearman
with a constant side are 0 (SciPy answers NaN there; 0 keeps medians over trials and
model selection well defined).
"""

import warnings
from typing import Dict, Sequence

import numpy as np


def _sklearn_metrics():
  """scikit-learn and SciPy are imported when a score is first computed: together they
  take about a second of CPU to import, which every command reading the task registry
  (finetune.config) would otherwise pay at start, --help and bad flags included."""
  import sklearn.metrics  # pylint: disable=g-import-not-at-top
  return sklearn.metrics


def _scipy_stats():
  import scipy.stats  # pylint: disable=g-import-not-at-top
  return scipy.stats


def accuracy(labels, predictions) -> float:
  return float(_sklearn_metrics().accuracy_score(labels, predictions))


def f1(labels, predictions, positive=1) -> float:
  """F1 of the positive class (binary tasks: MRPC, QQP)."""
  # As booleans: a class absent from both sides is no error, and any label set works.
  return float(_sklearn_metrics().f1_score(np.asarray(labels) == positive,
                                           np.asarray(predictions) == positive,
                                           zero_division=0))


def matthews_corrcoef(labels, predictions) -> float:
  """Matthews correlation, multi-class form (Gorodkin's R_K)."""
  with warnings.catch_warnings():  # its note on a single class: the answer, 0, stands
    warnings.simplefilter("ignore", UserWarning)
    return float(_sklearn_metrics().matthews_corrcoef(labels, predictions))


def _correlation(statistic, labels, predictions) -> float:
  labels, predictions = (np.asarray(x, np.float64) for x in (labels, predictions))
  if np.ptp(labels) == 0 or np.ptp(predictions) == 0:  # SciPy's NaN (and warning)
    return 0.0
  return float(np.clip(statistic(labels, predictions)[0], -1.0, 1.0))


def pearson(labels, predictions) -> float:
  return _correlation(_scipy_stats().pearsonr, labels, predictions)


def spearman(labels, predictions) -> float:
  """Pearson correlation of the ranks, ties sharing their mean rank."""
  return _correlation(_scipy_stats().spearmanr, labels, predictions)


SENTENCE_METRICS = {
    "accuracy": accuracy,
    "f1": f1,
    "mcc": matthews_corrcoef,
    "pearson": pearson,
    "spearman": spearman,
}


def score(metric_names: Sequence[str], labels, predictions) -> Dict[str, float]:
  """Percentages for each named metric, e.g. {"accuracy": 84.1, "f1": 88.9}."""
  return {name: 100.0 * SENTENCE_METRICS[name](labels, predictions)
          for name in metric_names}
