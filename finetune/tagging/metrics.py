"""Tagging scores: entities counted as conlleval counts them (precision, recall and F1
over all entities and per type), and token accuracy for tag sets without entities."""

from typing import Dict, List, Sequence, Tuple

import numpy as np


def entity_spans(tags: Sequence[str]) -> List[Tuple[str, int, int]]:
  """(type, first, last) entities of one sentence's B-/I-/E-/S-/O tags (IOB1, IOB2 and
  BIOES alike), as conlleval reads them.

  An entity starts at B- or S-, and also at I- or E- when no entity of its type is open
  (after O, after another type, after an E- or S- that closed one): conlleval's lenient
  reading of ill-formed tags. It ends at E- or S-, before B-, S- or O, and where the
  type changes.
  """
  spans = []
  open_type, start = None, 0
  for i, tag in enumerate(list(tags) + ["O"]):
    prefix, _, kind = tag.partition("-")
    if tag != "O" and (prefix not in ("B", "I", "E", "S") or not kind):
      raise ValueError(f"tag {tag!r} at position {i} is neither O nor B-/I-/E-/S-TYPE")
    continues = open_type is not None and kind == open_type and prefix in ("I", "E")
    if open_type is not None and not continues:
      spans.append((open_type, start, i - 1))
      open_type = None
    if tag != "O" and not continues:
      open_type, start = kind, i
    if prefix in ("E", "S"):
      spans.append((open_type, start, i))
      open_type = None
  return spans


def _figures(correct: int, gold: int, predicted: int) -> Dict[str, float]:
  precision = correct / predicted if predicted else 0.0
  recall = correct / gold if gold else 0.0
  f1_value = 2 * precision * recall / (precision + recall) if correct else 0.0
  return {"precision": precision, "recall": recall, "f1": f1_value}


def entity_scores(gold_sentences: Sequence[Sequence[str]],
                  predicted_sentences: Sequence[Sequence[str]]) -> Dict[str, object]:
  """Entity-level precision, recall and F1 (fractions) over all sentences, as
  conlleval counts them (an entity is right when its type, first and last word are),
  and under "types" each type's, with its counts (correct, gold, predicted)."""
  counts: Dict[str, List[int]] = {}
  for gold, predicted in zip(gold_sentences, predicted_sentences):
    gold_spans, predicted_spans = set(entity_spans(gold)), set(entity_spans(predicted))
    for spans, column in ((gold_spans & predicted_spans, 0), (gold_spans, 1),
                          (predicted_spans, 2)):
      for kind, _, _ in spans:
        counts.setdefault(kind, [0, 0, 0])[column] += 1
  total = [sum(c[k] for c in counts.values()) for k in range(3)]
  return {**_figures(*total), "types": {
      kind: {**_figures(*c), "correct": c[0], "gold": c[1], "predicted": c[2]}
      for kind, c in sorted(counts.items())}}


def score(metrics: Sequence[str], gold_sentences, predicted_sentences) -> Dict[str, float]:
  """A task's headline scores in percent: "f1" gives f1, precision and recall of
  entities; "accuracy", of words."""
  scores = {}
  for metric in metrics:
    if metric == "f1":
      entities = entity_scores(gold_sentences, predicted_sentences)
      scores.update({name: 100.0 * entities[name] for name in ("f1", "precision", "recall")})
    else:  # the words whose predicted tag is the gold one
      right = [g == p for gold, predicted in zip(gold_sentences, predicted_sentences)
               for g, p in zip(gold, predicted)]
      scores["accuracy"] = 100.0 * float(np.mean(right)) if right else 0.0
  return scores
