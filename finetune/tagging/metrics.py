"""Chunk F1 as conlleval counts it: span-level precision, recall and F1 of B-/I-/O tags."""

from typing import Dict, List, Sequence, Tuple


def chunk_spans(tags: Sequence[str]) -> List[Tuple[str, int, int]]:
  """(type, first, last) chunks of one sentence's B-/I-/O tags, as conlleval reads them.

  A chunk starts at B-X, and also at I-X when the previous tag is O or of another type
  (conlleval's lenient reading of ill-formed IOB); it ends where the next one starts or
  at O.
  """
  spans = []
  current_type, start = None, 0
  for i, tag in enumerate(list(tags) + ["O"]):
    prefix, _, chunk_type = tag.partition("-")
    if tag != "O" and prefix not in ("B", "I"):
      raise ValueError(f"tag {tag!r} at position {i} is neither O nor B-/I-TYPE")
    continues = prefix == "I" and chunk_type == current_type
    if current_type is not None and not continues:
      spans.append((current_type, start, i - 1))
      current_type = None
    if tag != "O" and not continues:
      current_type, start = chunk_type, i
  return spans


def chunk_f1(gold_sentences: Sequence[Sequence[str]],
             predicted_sentences: Sequence[Sequence[str]]) -> Dict[str, float]:
  """Span-level precision, recall and F1 (fractions) over all sentences (conlleval)."""
  if len(gold_sentences) != len(predicted_sentences):
    raise ValueError(f"{len(gold_sentences)} gold sentences but "
                     f"{len(predicted_sentences)} predicted ones")
  n_correct = n_gold = n_predicted = 0
  for i, (gold, predicted) in enumerate(zip(gold_sentences, predicted_sentences)):
    if len(gold) != len(predicted):
      raise ValueError(f"sentence {i}: {len(gold)} gold tags but {len(predicted)} "
                       "predicted ones")
    gold_spans, predicted_spans = set(chunk_spans(gold)), set(chunk_spans(predicted))
    n_correct += len(gold_spans & predicted_spans)
    n_gold += len(gold_spans)
    n_predicted += len(predicted_spans)
  precision = n_correct / n_predicted if n_predicted else 0.0
  recall = n_correct / n_gold if n_gold else 0.0
  f1_value = 2 * precision * recall / (precision + recall) if n_correct else 0.0
  return {"precision": precision, "recall": recall, "f1": f1_value}
