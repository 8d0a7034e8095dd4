"""A long input read in overlapping windows, as BERT's QA reads a long context: its words'
pieces, where the windows start, and for each piece the window where it has the most
context. Shared by the families' features and their exported readers; numpy only."""

from typing import Dict, Iterable, List, Sequence, Tuple

import numpy as np


def text_ids(tokenizer, texts: Sequence[str]) -> List[np.ndarray]:
  """Each text's token ids, tokenized in one batch."""
  # A newline inside a text is whitespace to BERT, and would end a line of batch_ids.
  ids, offsets = tokenizer.batch_ids([t.replace("\n", " ") for t in texts])
  return [ids[offsets[i]:offsets[i + 1]] for i in range(len(texts))]


class WordPieces:
  """Texts given as words, each word tokenized alone (so each piece knows its word) and
  each distinct one once, in one batch. A word BERT's cleaning empties (only control
  characters) has no piece, or [UNK] where `empty_as_unk`."""

  def __init__(self, tokenizer, texts: Iterable[Sequence[str]], empty_as_unk: bool = False):
    self.rows: Dict[str, int] = {}
    for words in texts:
      for word in words:
        self.rows.setdefault(word, len(self.rows))
    ids, offsets = tokenizer.batch_ids([w.replace("\n", " ") for w in self.rows])
    self.ids, self.starts, self.counts = ids, offsets[:-1], np.diff(offsets)
    if empty_as_unk:  # the [UNK] appended, the empty words' one piece
      empty = self.counts == 0
      self.ids = np.append(ids, tokenizer.vocab.unk_id).astype(np.int32)
      self.starts = np.where(empty, len(ids), self.starts)
      self.counts = np.where(empty, 1, self.counts)

  def pieces(self, words: Sequence[str]) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The words' piece ids, and each word's first piece and number of pieces."""
    rows = np.array([self.rows[w] for w in words], np.int64)
    counts = self.counts[rows]
    first = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    within = np.arange(counts.sum()) - np.repeat(first, counts)
    return self.ids[np.repeat(self.starts[rows], counts) + within], first, counts


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
