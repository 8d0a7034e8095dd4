"""A long input read in overlapping windows, as BERT's QA reads a long context: where the
windows start, and for each piece the window where it has the most context. Shared by
the QA and tagging families (their features, their exported readers); numpy only."""

from typing import List, Sequence, Tuple

import numpy as np


def doc_spans(num_pieces: int, max_pieces: int, stride: int) -> List[Tuple[int, int]]:
  """(start, length) windows over the context: every `stride` pieces until the end."""
  spans, start = [], 0
  while True:
    length = min(num_pieces - start, max_pieces)
    spans.append((start, length))
    if start + length >= num_pieces:
      return spans
    start += min(length, stride)


def max_context_owner(spans: Sequence[Tuple[int, int]], num_pieces: int) -> np.ndarray:
  """For every context piece, the window where it has the most context (first on ties)."""
  position = np.arange(num_pieces)
  best_score = np.full(num_pieces, -np.inf)
  owner = np.full(num_pieces, -1)
  for index, (start, length) in enumerate(spans):
    inside = (position >= start) & (position < start + length)
    score = np.minimum(position - start, start + length - 1 - position) + 0.01 * length
    better = inside & (score > best_score)
    owner[better], best_score[better] = index, score[better]
  return owner
