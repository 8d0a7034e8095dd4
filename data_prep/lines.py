"""Corpus lines to token ids, a block of text at a time.

A block's lines are tokenized in one batch (data_prep.tokenizer); a document ends at a
blank line or a file's end; a giant line is tokenized a piece at a time and every line
is cut where nothing beyond can reach an example, so memory stays that of one block.
"""

from typing import List

import numpy as np

from data_prep import corpus as corpus_lib
from data_prep import examples as examples_lib
from data_prep.build_config import Stats

GIANT_LINE_CHARS = 1 << 20  # longer lines are tokenized a piece at a time


def tokenize_batch(tokenizer, texts: List[str], stats: Stats):
  """Ids (a flat list) and offsets of `texts`, and each text's number of word-pieces
  before lines are cut (an array); a giant line goes piece by piece."""
  giant = {i: text for i, text in enumerate(texts) if len(text) > GIANT_LINE_CHARS}
  if giant:
    texts = ["" if i in giant else text for i, text in enumerate(texts)]
  ids, offsets = tokenizer.batch_ids(texts)
  lengths = np.diff(offsets)
  stats.tokens += len(ids)
  stats.unk_tokens += int(np.count_nonzero(ids == tokenizer.vocab.unk_id))
  ids, offsets = _clip_lines(ids, offsets, stats)
  ids, offsets = ids.tolist(), offsets.tolist()  # list slices are cheaper per line
  for i in sorted(giant, reverse=True):  # from the end: earlier offsets stay valid
    tokens_before = stats.tokens
    line_ids = _giant_line_ids(tokenizer, giant[i], stats)
    lengths[i] = stats.tokens - tokens_before
    ids[offsets[i]:offsets[i]] = line_ids
    offsets[i + 1:] = [offset + len(line_ids) for offset in offsets[i + 1:]]
  return ids, offsets, lengths


def _giant_line_ids(tokenizer, text: str, stats: Stats) -> List[int]:
  """The first UNBOUNDED ids of a very long line, tokenized a piece at a time.

  Pieces end just after a space, which always ends a word in BERT's rules, so they give
  the same tokens as the whole line; memory stays that of one piece, not of the line.
  """
  kept, start = [], 0
  while start < len(text):
    end = start + GIANT_LINE_CHARS
    if end < len(text):
      cut = text.rfind(" ", start, end)
      end = cut + 1 if cut > start else (text.find(" ", end) + 1 or len(text))
    ids, _ = tokenizer.batch_ids([text[start:end]])
    stats.tokens += len(ids)
    stats.unk_tokens += int(np.count_nonzero(ids == tokenizer.vocab.unk_id))
    room = examples_lib.UNBOUNDED - len(kept)
    kept.extend(ids[:room].tolist())
    stats.dropped_tokens += max(0, len(ids) - room)
    start = end
  return kept


def _clip_lines(ids: np.ndarray, offsets: np.ndarray, stats: Stats):
  """Cuts lines to UNBOUNDED tokens: what lies beyond can never reach an example.

  Packing compares lengths with targets of at most UNBOUNDED, so its choices (and its
  random draws) are the same as with the whole line; a 50 MB line stays cheap.
  """
  lengths = np.diff(offsets)
  if lengths.size == 0 or lengths.max() <= examples_lib.UNBOUNDED:
    return ids, offsets
  position = np.arange(len(ids)) - np.repeat(offsets[:-1], lengths)
  kept = np.minimum(lengths, examples_lib.UNBOUNDED)
  stats.dropped_tokens += int(lengths.sum() - kept.sum())
  return ids[position < examples_lib.UNBOUNDED], np.concatenate([[0], np.cumsum(kept)])


def line_batches(spans, blanks_separate_docs: bool, stats: Stats):
  """Batches of stripped lines (None where a document ends), one per block of text,
  each with the number of the file's bytes read for it and a Place, which says where
  in the corpus each of its entries is (for messages).

  As in the original, a line is stripped of surrounding whitespace; a blank line ends
  the document (unless blanks do not separate documents), and so does a file's end.
  Repeated ends are harmless: an end with nothing pending builds nothing.
  """
  for span in spans:
    previous, has_text = None, False  # None: a blank line, or the start of the span
    lines_before = 0
    for block, file_bytes in corpus_lib.read_blocks(span):
      text, invalid = corpus_lib.decode(block)
      stats.invalid_bytes += invalid
      lines = text.split("\n")
      if text.endswith("\n"):
        lines.pop()
      batch = [line.strip() or None for line in lines]
      place = Place(span, lines_before)
      lines_before += len(batch)
      stats.lines += len(batch) - batch.count(None)
      if blanks_separate_docs:
        stats.documents += sum(1 for before, line in zip([previous] + batch, batch)
                               if before is None and line is not None)
        previous = batch[-1] if batch else previous
      else:
        place.kept = [i for i, line in enumerate(batch) if line is not None]
        batch = [batch[i] for i in place.kept]
        stats.documents += bool(batch) and not has_text
        has_text = has_text or bool(batch)
      yield batch, file_bytes, place
    yield [None], 0, Place(span, lines_before)


class Place:
  """Where a batch of line_batches lies: its span and how many of the span's lines
  come before it (and, when blank lines were left out, which lines it kept)."""

  def __init__(self, span: corpus_lib.Span, lines_before: int):
    self.span, self.lines_before, self.kept = span, lines_before, None

  def __call__(self, index: int) -> str:
    """"<file>:<line>" of the batch's entry `index` (counting the file's lines before
    the span: slow, for messages only)."""
    in_span = self.lines_before + (index if self.kept is None else self.kept[index])
    return f"{self.span.path}:{corpus_lib.lines_before(self.span) + in_span + 1}"
