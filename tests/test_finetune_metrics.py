"""finetune/sentence/metrics.py (scikit-learn's and SciPy's metrics) against NumPy
computations written here from the definitions, and finetune/tagging/metrics.py against
seqeval and hand-made cases."""

import numpy as np
import pytest
import seqeval.metrics

from finetune.sentence import metrics
from finetune.tagging import metrics as tagging_metrics


def reference_mcc(labels, predictions) -> float:
  """Gorodkin's R_K from the confusion matrix C: (c*s - t.p) / sqrt((s^2 - p.p)(s^2 - t.t))
  with c the correct count, s the total, t and p the gold and predicted class totals;
  0 when a side is constant."""
  classes = sorted(set(labels) | set(predictions))
  confusion = np.zeros((len(classes), len(classes)))
  for gold, predicted in zip(labels, predictions):
    confusion[classes.index(gold), classes.index(predicted)] += 1
  t, p = confusion.sum(axis=1), confusion.sum(axis=0)
  c, s = np.trace(confusion), confusion.sum()
  denominator = (s * s - p @ p) * (s * s - t @ t)
  return 0.0 if denominator == 0 else (c * s - t @ p) / np.sqrt(denominator)


def reference_f1(labels, predictions, positive=1) -> float:
  both = sum(g == positive and q == positive for g, q in zip(labels, predictions))
  either = sum(g == positive for g in labels) + sum(q == positive for q in predictions)
  return 0.0 if either == 0 else 2 * both / either


def reference_ranks(values) -> np.ndarray:
  """1-based ranks, tied values sharing the mean of the ranks they span."""
  values = list(values)
  ordered = sorted(values)
  return np.array([np.mean([i + 1 for i, o in enumerate(ordered) if o == v])
                   for v in values])


def reference_pearson(x, y) -> float:
  x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
  x, y = x - x.mean(), y - y.mean()
  norms = np.sqrt((x * x).sum() * (y * y).sum())
  return 0.0 if norms == 0 else float((x * y).sum() / norms)


def _random_cases(num_classes):
  rng = np.random.default_rng(num_classes)
  for size in (1, 2, 7, 50, 333):
    labels = rng.integers(0, num_classes, size)
    predictions = np.where(rng.random(size) < 0.6, labels,
                           rng.integers(0, num_classes, size))
    yield labels, predictions


def test_a_small_case_worked_by_hand():
  labels, predictions = [0, 1, 1, 0, 1], [0, 1, 0, 0, 1]
  # TP 2, FP 0, FN 1, TN 2: F1 = 4/5, MCC = (2*2 - 0*1) / sqrt(2*3*3*2) = 4/6.
  assert metrics.accuracy(labels, predictions) == pytest.approx(4 / 5)
  assert metrics.f1(labels, predictions) == pytest.approx(4 / 5)
  assert metrics.matthews_corrcoef(labels, predictions) == pytest.approx(4 / 6)
  # Ranks of [1, 2, 2, 3] are [1, 2.5, 2.5, 4]; of [1, 3, 2, 4] themselves.
  assert metrics.spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(
      reference_pearson([1, 2.5, 2.5, 4], [1, 3, 2, 4]))
  assert reference_pearson([1, 2.5, 2.5, 4], [1, 3, 2, 4]) == pytest.approx(
      4.5 / np.sqrt(4.5 * 5))
  # Centred: [-1, 0, 1] and [-7, -1, 8] / 3.
  assert metrics.pearson([1, 2, 3], [2, 4, 7]) == pytest.approx(
      (15 / 3) / np.sqrt(2 * 114 / 9))


@pytest.mark.parametrize("num_classes", [2, 3, 5])
def test_classification_metrics_equal_the_definitions(num_classes):
  for labels, predictions in _random_cases(num_classes):
    assert metrics.accuracy(labels, predictions) == pytest.approx(
        np.mean(labels == predictions))
    assert metrics.matthews_corrcoef(labels, predictions) == pytest.approx(
        reference_mcc(labels, predictions))
    assert metrics.f1(labels, predictions) == pytest.approx(
        reference_f1(labels, predictions))


def test_classification_metrics_degenerate_cases():
  cases = [([0, 1, 1, 0], [1, 1, 1, 1]),   # constant prediction
           ([1, 1, 1], [0, 1, 0]),         # constant gold
           ([0, 0, 0], [0, 0, 0]),         # no positives anywhere
           (["a", "b", "a"], ["a", "b", "b"])]  # string labels
  for labels, predictions in cases:
    assert metrics.matthews_corrcoef(labels, predictions) == pytest.approx(
        reference_mcc(labels, predictions))
  assert metrics.matthews_corrcoef([0, 1, 1, 0], [1, 1, 1, 1]) == 0.0
  assert metrics.f1([0, 0, 0], [0, 0, 0]) == 0.0
  # The positive label is 1 (or the one given), whatever the other labels are.
  assert metrics.f1([2, 1, 1], [2, 2, 1]) == pytest.approx(2 / 3)
  assert metrics.f1(["no", "yes"], ["yes", "yes"], positive="yes") == pytest.approx(2 / 3)


def test_correlations_equal_the_definitions_with_ties():
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
          reference_pearson(labels, predictions), abs=1e-12)
      assert metrics.spearman(labels, predictions) == pytest.approx(
          reference_pearson(reference_ranks(labels), reference_ranks(predictions)),
          abs=1e-12)


def test_correlation_with_a_constant_side_is_zero():
  assert metrics.pearson([1.0, 2.0, 3.0], [2.0, 2.0, 2.0]) == 0.0
  assert metrics.spearman([2.0, 2.0, 2.0], [1.0, 2.0, 3.0]) == 0.0


def test_score_reports_percentages():
  labels, predictions = [0, 1, 1, 0], [0, 1, 0, 0]
  result = metrics.score(["accuracy", "f1"], labels, predictions)
  assert result == pytest.approx({"accuracy": 75.0, "f1": 100 * 2 / 3})


def test_entity_spans_follow_conlleval_rules():
  tags = ["B-NP", "I-NP", "I-VP", "O", "I-NP", "B-NP", "B-PP", "I-PP", "I-NP"]
  assert tagging_metrics.entity_spans(tags) == [
      ("NP", 0, 1), ("VP", 2, 2), ("NP", 4, 4), ("NP", 5, 5), ("PP", 6, 7),
      ("NP", 8, 8)]
  # BIOES: an E- or S- closes its entity; an I- or E- with none of its type open opens
  # one (after O, after an E- that closed one, after another type).
  assert tagging_metrics.entity_spans(
      ["S-PER", "B-ORG", "E-ORG", "I-ORG", "E-ORG", "O", "E-LOC", "B-LOC", "S-LOC",
       "I-PER", "I-LOC"]) == [
           ("PER", 0, 0), ("ORG", 1, 2), ("ORG", 3, 4), ("LOC", 6, 6), ("LOC", 7, 7),
           ("LOC", 8, 8), ("PER", 9, 9), ("LOC", 10, 10)]
  with pytest.raises(ValueError, match="neither O nor"):
    tagging_metrics.entity_spans(["NP"])
  with pytest.raises(ValueError, match="neither O nor"):
    tagging_metrics.entity_spans(["X-NP"])
  # seqeval's conlleval reading agrees on every kind of ill-formed sequence.
  rng = np.random.default_rng(0)
  tag_set = ["O"] + [f"{p}-{t}" for p in "BIES" for t in ("A", "B")]
  for _ in range(3000):
    tags = list(rng.choice(tag_set, rng.integers(0, 10)))
    assert sorted(tagging_metrics.entity_spans(tags)) == sorted(
        seqeval.metrics.sequence_labeling.get_entities(tags)), tags


def test_entity_scores_hand_counts_per_type_and_seqeval():
  gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "B-PER", "I-PER", "O"],
          ["I-LOC", "I-LOC", "B-LOC"]]
  predicted = [["B-PER", "I-PER", "O", "B-PER"], ["B-ORG", "I-PER", "I-PER", "B-LOC"],
               ["B-LOC", "I-LOC", "I-LOC"]]
  # Counted by hand, conlleval's way: gold PER(0-1) LOC(3) | ORG(0) PER(1-2) |
  # LOC(0-1) LOC(2) (an I- after nothing opens one; a B- after I- of its type opens
  # another); predicted PER(0-1) PER(3) | ORG(0) PER(1-2) LOC(3) | LOC(0-2) (a type
  # change inside would have closed it; I- after B- of its type continues).
  # Right: PER(0-1), ORG(0), PER(1-2): 3 of 6 predicted, 3 of 6 gold.
  result = tagging_metrics.entity_scores(gold, predicted)
  assert result["types"] == {
      "LOC": {"correct": 0, "gold": 3, "predicted": 2, "precision": 0.0, "recall": 0.0,
              "f1": 0.0},
      "ORG": {"correct": 1, "gold": 1, "predicted": 1, "precision": 1.0, "recall": 1.0,
              "f1": 1.0},
      "PER": {"correct": 2, "gold": 2, "predicted": 3, "precision": pytest.approx(2 / 3),
              "recall": 1.0, "f1": pytest.approx(0.8)}}
  assert {k: result[k] for k in ("precision", "recall", "f1")} == pytest.approx(
      {"precision": 3 / 6, "recall": 3 / 6, "f1": 3 / 6})
  assert result["f1"] == pytest.approx(seqeval.metrics.f1_score(gold, predicted))
  # Words: 3 + 2 + 1 of 11 tags equal.
  assert tagging_metrics.score(["f1", "accuracy"], gold, predicted) == pytest.approx(
      {"f1": 50.0, "precision": 50.0, "recall": 50.0, "accuracy": 100 * 6 / 11})

  rng = np.random.default_rng(3)
  tag_set = ["O", "B-NP", "I-NP", "B-VP", "I-VP", "B-PP", "I-PP"]
  gold = [list(rng.choice(tag_set, rng.integers(1, 15))) for _ in range(40)]
  predicted = [[t if rng.random() < 0.7 else rng.choice(tag_set) for t in s]
               for s in gold]
  result = tagging_metrics.entity_scores(gold, predicted)
  assert result["f1"] == pytest.approx(seqeval.metrics.f1_score(gold, predicted))
  assert result["precision"] == pytest.approx(
      seqeval.metrics.precision_score(gold, predicted))
  assert result["recall"] == pytest.approx(seqeval.metrics.recall_score(gold, predicted))
  report = seqeval.metrics.classification_report(gold, predicted, output_dict=True)
  for kind, figures in result["types"].items():
    assert figures["f1"] == pytest.approx(report[kind]["f1-score"]), kind
    assert figures["gold"] == report[kind]["support"], kind
