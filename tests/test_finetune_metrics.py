"""finetune/sentence/metrics.py and finetune/tagging/metrics.py against sklearn/scipy (test-only dependencies) and hand-made cases."""

import warnings

import numpy as np
import pytest
import scipy.stats
import seqeval.metrics
import sklearn.metrics

from finetune.sentence import metrics
from finetune.tagging import metrics as tagging_metrics


def _random_cases(num_classes):
  rng = np.random.default_rng(num_classes)
  for size in (1, 2, 7, 50, 333):
    labels = rng.integers(0, num_classes, size)
    predictions = np.where(rng.random(size) < 0.6, labels,
                           rng.integers(0, num_classes, size))
    yield labels, predictions


@pytest.mark.parametrize("num_classes", [2, 3, 5])
def test_classification_metrics_equal_sklearn(num_classes):
  for labels, predictions in _random_cases(num_classes):
    assert metrics.accuracy(labels, predictions) == pytest.approx(
        sklearn.metrics.accuracy_score(labels, predictions))
    with warnings.catch_warnings():
      warnings.simplefilter("ignore")  # sklearn warns on its degenerate cases
      expected_mcc = sklearn.metrics.matthews_corrcoef(labels, predictions)
      expected_f1 = sklearn.metrics.f1_score(labels == 1, predictions == 1)
    assert metrics.matthews_corrcoef(labels, predictions) == pytest.approx(expected_mcc)
    assert metrics.f1(labels, predictions) == pytest.approx(expected_f1)


def test_classification_metrics_degenerate_cases_match_sklearn():
  cases = [([0, 1, 1, 0], [1, 1, 1, 1]),   # constant prediction
           ([1, 1, 1], [0, 1, 0]),         # constant gold
           ([0, 0, 0], [0, 0, 0]),         # no positives anywhere
           (["a", "b", "a"], ["a", "b", "b"])]  # string labels
  for labels, predictions in cases:
    with warnings.catch_warnings():
      warnings.simplefilter("ignore")
      assert metrics.matthews_corrcoef(labels, predictions) == pytest.approx(
          sklearn.metrics.matthews_corrcoef(labels, predictions))
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    assert metrics.f1([0, 0, 0], [0, 0, 0]) == sklearn.metrics.f1_score(
        [0, 0, 0], [0, 0, 0]) == 0.0
  assert metrics.matthews_corrcoef([0, 1, 1, 0], [1, 1, 1, 1]) == 0.0


def test_correlations_equal_scipy_with_ties():
  rng = np.random.default_rng(7)
  for size in (3, 10, 200):
    for tie_step in (None, 0.5, 2.0):  # rounding to a coarse grid makes many ties
      labels = rng.normal(size=size) * 2
      predictions = labels + rng.normal(size=size)
      if tie_step:
        labels, predictions = (np.round(labels / tie_step) * tie_step,
                               np.round(predictions / tie_step) * tie_step)
      if np.ptp(labels) == 0 or np.ptp(predictions) == 0:
        continue
      assert metrics.pearson(labels, predictions) == pytest.approx(
          scipy.stats.pearsonr(labels, predictions)[0], abs=1e-12)
      assert metrics.spearman(labels, predictions) == pytest.approx(
          scipy.stats.spearmanr(labels, predictions)[0], abs=1e-12)
      np.testing.assert_array_equal(metrics.average_ranks(predictions),
                                    scipy.stats.rankdata(predictions))


def test_correlation_with_constant_side_is_zero_where_scipy_gives_nan():
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    assert np.isnan(scipy.stats.pearsonr([1.0, 2.0, 3.0], [2.0, 2.0, 2.0])[0])
  assert metrics.pearson([1.0, 2.0, 3.0], [2.0, 2.0, 2.0]) == 0.0
  assert metrics.spearman([2.0, 2.0, 2.0], [1.0, 2.0, 3.0]) == 0.0


def test_score_reports_percentages_and_rejects_bad_input():
  labels, predictions = [0, 1, 1, 0], [0, 1, 0, 0]
  result = metrics.score(["accuracy", "f1"], labels, predictions)
  assert result == pytest.approx({"accuracy": 75.0, "f1": 100 * 2 / 3})
  with pytest.raises(ValueError, match="unknown metric 'acc'"):
    metrics.score(["acc"], labels, predictions)
  with pytest.raises(ValueError, match="equal length"):
    metrics.accuracy([0, 1], [0])
  with pytest.raises(ValueError, match="at least one"):
    metrics.pearson([], [])


def test_chunk_spans_follow_conlleval_rules():
  tags = ["B-NP", "I-NP", "I-VP", "O", "I-NP", "B-NP", "B-PP", "I-PP", "I-NP"]
  assert tagging_metrics.chunk_spans(tags) == [
      ("NP", 0, 1), ("VP", 2, 2), ("NP", 4, 4), ("NP", 5, 5), ("PP", 6, 7),
      ("NP", 8, 8)]
  with pytest.raises(ValueError, match="neither O nor"):
    tagging_metrics.chunk_spans(["NP"])


def test_chunk_f1_hand_reference_and_seqeval():
  gold = [["B-NP", "I-NP", "O", "B-VP"], ["B-PP", "B-NP", "I-NP"]]
  predicted = [["B-NP", "I-NP", "O", "B-NP"], ["B-PP", "I-NP", "I-NP"]]
  # gold: NP(0-1) VP(3) | PP(0) NP(1-2); predicted: NP(0-1) NP(3) | PP(0) NP(1-2).
  result = tagging_metrics.chunk_f1(gold, predicted)
  assert result == pytest.approx({"precision": 3 / 4, "recall": 3 / 4, "f1": 3 / 4})
  assert result["f1"] == pytest.approx(seqeval.metrics.f1_score(gold, predicted))

  rng = np.random.default_rng(3)
  tag_set = ["O", "B-NP", "I-NP", "B-VP", "I-VP", "B-PP", "I-PP"]
  gold = [list(rng.choice(tag_set, rng.integers(1, 15))) for _ in range(40)]
  predicted = [[t if rng.random() < 0.7 else rng.choice(tag_set) for t in s]
               for s in gold]
  result = tagging_metrics.chunk_f1(gold, predicted)
  assert result["f1"] == pytest.approx(seqeval.metrics.f1_score(gold, predicted))
  assert result["precision"] == pytest.approx(
      seqeval.metrics.precision_score(gold, predicted))
  assert result["recall"] == pytest.approx(seqeval.metrics.recall_score(gold, predicted))
