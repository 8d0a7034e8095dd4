"""Question answering examples -> fixed-size windows of [CLS] question [SEP] context [SEP].

The original's featurization: every whitespace word of the context is WordPiece-tokenized
on its own (so each piece knows its word), the question keeps max_query_length pieces,
and a context longer than a window is covered by windows starting every doc_stride
pieces. A piece seen by several windows is scored only in the one where it has the most
context (the larger of min(left, right) + 0.01 * window length). The gold answer (the
first one found at its offset) is moved from words to pieces and tightened to the
pieces of its own tokenized text where they occur inside those words ("(1895-1943)."
-> "1895"). A window that does not hold the whole answer, and every window of an
unanswerable question, points at [CLS] (position 0).

Tokenization runs in a few large batches: all distinct context words at once, then all
questions, then all answers.
"""

import dataclasses
import logging
from typing import Dict, List, Sequence, Tuple

import numpy as np

from data_prep.tokenizer import Tokenizer
from finetune.errors import DataError
from finetune.qa.examples import QAExample


@dataclasses.dataclass
class Windows:
  """Model inputs of every window and what post-processing needs to read them back."""
  arrays: Dict[str, np.ndarray]  # input_ids, input_mask, segment_ids, start_positions,
                                 # end_positions, is_impossible: [N, ...] model features
  example_index: np.ndarray      # [N] the example (position in the list) of each window
  token_to_word: np.ndarray      # [N, L] word of example.doc_tokens, -1 outside the context
  max_context: np.ndarray        # [N, L] whether this window is the piece's best one
  unmapped_answers: int = 0      # gold answers that cover no word piece


def _split_ids(ids: np.ndarray, offsets: np.ndarray) -> List[np.ndarray]:
  return [ids[offsets[i]:offsets[i + 1]] for i in range(len(offsets) - 1)]


class _Contexts:
  """Each distinct context's pieces with their word maps, tokenized in one batch."""

  def __init__(self, tokenizer: Tokenizer, examples: Sequence[QAExample]):
    word_ids: Dict[str, int] = {}
    self.words_of: Dict[str, np.ndarray] = {}
    for example in examples:
      if example.context not in self.words_of:
        self.words_of[example.context] = np.array(
            [word_ids.setdefault(w, len(word_ids)) for w in example.doc_tokens], np.int64)
    self.ids, offsets = tokenizer.batch_ids(list(word_ids))
    if len(offsets) != len(word_ids) + 1:
      raise DataError(f"tokenizing {len(word_ids)} context words gave "
                      f"{len(offsets) - 1} results (a word holds a line break?)")
    self.starts, self.counts = offsets[:-1], np.diff(offsets)
    self._cache = {}

  def pieces(self, context: str) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(piece ids, word of each piece, first piece of each word) of one context."""
    if context not in self._cache:
      words = self.words_of[context]
      counts = self.counts[words]
      first = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
      within = np.arange(counts.sum()) - np.repeat(first, counts)
      ids = self.ids[np.repeat(self.starts[words], counts) + within]
      tok_to_word = np.repeat(np.arange(len(words)), counts)
      self._cache = {context: (ids, tok_to_word, first)}  # examples come by paragraph
    return self._cache[context]


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


def improve_answer_span(pieces: np.ndarray, start: int, end: int,
                        answer: np.ndarray) -> Tuple[int, int]:
  """The first sub-span of pieces[start:end + 1] equal to the answer's own pieces."""
  n = len(answer)
  if n == 0:
    return start, end
  for new_start in range(start, end - n + 2):
    if np.array_equal(pieces[new_start:new_start + n], answer):
      return new_start, new_start + n - 1
  return start, end


def featurize(tokenizer: Tokenizer, examples: Sequence[QAExample], max_seq_length: int,
              max_query_length: int, doc_stride: int) -> Windows:
  """Every example's windows, in example order."""
  if doc_stride < 1:
    raise ValueError(f"doc_stride {doc_stride}: windows must advance by at least 1 piece")
  vocab = tokenizer.vocab
  contexts = _Contexts(tokenizer, examples)
  questions = _split_ids(*tokenizer.batch_ids(
      [" ".join(e.question.split()) for e in examples]))
  answered = [i for i, e in enumerate(examples) if e.answers and not e.is_impossible]
  answer_pieces = dict(zip(answered, _split_ids(*tokenizer.batch_ids(
      [" ".join(examples[i].answers[0].text.split()) for i in answered]))))

  # Per window: (example index, question pieces, start and length in the context,
  # which of its pieces it owns, the answer's piece span in the context or None).
  rows = []
  unmapped = 0
  for index, example in enumerate(examples):
    pieces, _, word_first = contexts.pieces(example.context)
    query = questions[index][:max_query_length]
    max_pieces = max_seq_length - len(query) - 3
    if max_pieces < 1:
      raise DataError(f"question {example.qid}: {len(query)} question pieces leave no "
                      f"room for the context in max_seq_length {max_seq_length}; lower "
                      "max_query_length or raise max_seq_length")
    answer_span = None
    if index in answer_pieces:
      answer = example.answers[0]
      start = word_first[answer.start_word]
      end = (word_first[answer.end_word + 1] - 1 if answer.end_word + 1 < len(word_first)
             else len(pieces) - 1)
      if end >= start:
        answer_span = improve_answer_span(pieces, start, end, answer_pieces[index])
      else:  # the answer's words have no pieces (e.g. only control characters)
        unmapped += 1
    spans = doc_spans(len(pieces), max_pieces, doc_stride)
    owner = max_context_owner(spans, len(pieces))
    for window, (start, length) in enumerate(spans):
      rows.append((index, query, start, length, owner[start:start + length] == window,
                   answer_span))
  if unmapped:
    logging.warning("%d gold answers cover no word piece and train as unanswerable "
                    "windows", unmapped)

  n = len(rows)
  arrays = {name: np.zeros([n, max_seq_length], np.int32)
            for name in ("input_ids", "input_mask", "segment_ids")}
  for name in ("start_positions", "end_positions", "is_impossible"):
    arrays[name] = np.zeros([n], np.int32)
  token_to_word = np.full([n, max_seq_length], -1, np.int32)
  max_context = np.zeros([n, max_seq_length], bool)
  example_index = np.array([row[0] for row in rows], np.int32)
  for i, (index, query, start, length, owned, answer_span) in enumerate(rows):
    pieces, tok_to_word, _ = contexts.pieces(examples[index].context)
    offset = len(query) + 2  # [CLS] question [SEP]
    total = offset + length + 1
    ids = arrays["input_ids"][i]
    ids[0], ids[1:offset - 1], ids[offset - 1] = vocab.cls_id, query, vocab.sep_id
    ids[offset:offset + length] = pieces[start:start + length]
    ids[total - 1] = vocab.sep_id
    arrays["input_mask"][i, :total] = 1
    arrays["segment_ids"][i, offset:total] = 1
    token_to_word[i, offset:offset + length] = tok_to_word[start:start + length]
    max_context[i, offset:offset + length] = owned
    arrays["is_impossible"][i] = examples[index].is_impossible
    if answer_span and start <= answer_span[0] and answer_span[1] < start + length:
      arrays["start_positions"][i] = answer_span[0] - start + offset
      arrays["end_positions"][i] = answer_span[1] - start + offset
  return Windows(arrays, example_index, token_to_word, max_context, unmapped)
