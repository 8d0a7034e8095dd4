"""The in-graph tokenizer of the serving export: raw UTF-8 strings to WordPiece ids.

GraphTokenizer reproduces data_prep/tokenizer.py (BERT's rules) on every code point: its
per-character steps are tables computed here from Python's own unicodedata and
str.lower, feeding FastWordpieceTokenizer. tensorflow-text's BertTokenizer and
FastBertTokenizer are not BERT's normalisation (ICU case folding and NFKC; control
characters made spaces): lower-casing, they tokenized 18 of SQuAD dev's 12,637 texts, 19
of GLUE's 104,672 and 354 of the shared corpus' 228,146 lines otherwise (e.g. "½", "ß",
a final sigma, C1 controls). Steps, as in data_prep's normalize():
1. drop control characters, U+0000 and U+FFFD; whitespace -> " "; spaces around CJK;
2. (lower-casing) U+03A3 in Python's Final_Sigma context -> U+03C2, by a regex over
   the cased / case-ignorable classes that str.lower itself reveals;
3. (lower-casing, accents) each character -> its str.lower, NFD, without Mn marks;
4. a run of over 200 word characters -> U+E000, which WordPiece maps to [UNK].
Invalid UTF-8 bytes become U+FFFD (then dropped, as data_prep's readers' replacement
characters are). The one rule it cannot follow: step 3 maps each character alone, while
NFD of a whole text also sorts adjacent combining characters by class; where a spacing
mark (Mc) of class 224/226 (U+302E, U+302F, U+1D16D) precedes one of a lower class
(U+1715 ... U+1D172, class 6, 9 or 216) with only Mn marks between, data_prep swaps the
two and the graph does not (e.g. U+1D16D U+1D165; with lower-casing on only). Every code
point alone or inside a word tokenizes identically.
"""

import functools
import sys
import unicodedata
from typing import Sequence

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from data_prep import reference_tokenizer as ref
from data_prep.tokenizer import LONG_WORD_MARK

_SPACE, _MARK = 0x20, ord(LONG_WORD_MARK)
# FastWordpieceTokenizer knows a byte limit only; words over 200 characters are the mark
# by then, so any limit above 200 characters of UTF-8 is BERT's.
_MAX_WORD_BYTES = 4 * ref.MAX_WORD_CHARS + 4
_CAPITAL_SIGMA, _FINAL_SIGMA = "\u03a3", "\u03c2"
_DROP, _KEEP, _TO_SPACE, _CJK = 0, 1, 2, 3


@functools.lru_cache(maxsize=None)  # seconds per process, not per export
def _code_point_classes():
  """Per code point: the step-1 action, Python-whitespace, BERT punctuation or space
  (numpy)."""
  code_points = np.arange(sys.maxunicode + 1)
  category = np.array([unicodedata.category(chr(cp)) for cp in code_points])
  is_space = np.array([chr(cp).isspace() for cp in code_points])
  control = np.char.startswith(category, "C") & ~np.isin(code_points, [9, 10, 13])
  space = (is_space | (category == "Zs")) & ~control
  punctuation = np.char.startswith(category, "P") | np.isin(
      code_points, [cp for cp in range(128) if ref.is_punctuation(chr(cp))])
  action = np.full(len(code_points), _KEEP, np.int32)
  for lo, hi in ref.CJK_RANGES:
    action[lo:hi + 1] = _CJK
  action[space] = _TO_SPACE
  action[control | np.isin(code_points, [0, 0xFFFD])] = _DROP
  return action, is_space, space | punctuation


def _runs(values: np.ndarray):
  """(starts, values) of the runs of equal values: a table for tf.searchsorted."""
  starts = np.concatenate([[0], np.flatnonzero(values[1:] != values[:-1]) + 1])
  return starts.astype(np.int32), values[starts].astype(np.int32)


def _re2_class(code_points) -> str:
  """An RE2 character class of the code points (surrogates left out)."""
  cps = sorted(cp for cp in code_points if not 0xD800 <= cp < 0xE000)
  ranges, start = [], None
  for i, cp in enumerate(cps):
    start = cp if start is None else start
    if i + 1 == len(cps) or cps[i + 1] != cp + 1:
      ranges.append(f"\\x{{{start:x}}}" + (f"-\\x{{{cp:x}}}" if cp > start else ""))
      start = None
  return "[" + "".join(ranges) + "]"


@functools.lru_cache(maxsize=None)
def _sigma_pattern() -> str:
  """A regex of U+03A3 in Python's Final_Sigma context (str.lower's one context rule):
  a cased character, case-ignorables, the sigma, case-ignorables, then no cased one.
  Python's cased / case-ignorable sets are read off str.lower's behaviour."""
  cased, ignorable = [], []
  for cp in np.flatnonzero(_code_point_classes()[0] != _DROP):
    ch = chr(cp)
    if 0xD800 <= cp < 0xE000:
      continue
    if (ch + _CAPITAL_SIGMA).lower().endswith(_FINAL_SIGMA):
      cased.append(cp)  # cased and not case-ignorable: it stops the context scan
    elif ("A" + ch + _CAPITAL_SIGMA).lower().endswith(_FINAL_SIGMA):
      ignorable.append(cp)
  c, i = _re2_class(cased), _re2_class(ignorable)
  other = "[^" + c[1:-1] + i[1:-1] + "]"
  return f"({c}{i}*)\\x{{3a3}}({i}*(?:{other}|$))"


@functools.lru_cache(maxsize=None)
def _char_map(lower_case: bool, accents: bool):
  """Sorted code points that step 3 changes and their replacements ([K, width], -1
  padded)."""
  keys, values = [], []
  for cp in np.flatnonzero(_code_point_classes()[0] != _DROP):
    ch = chr(cp)
    if 0xD800 <= cp < 0xE000:
      continue
    out = ch.lower() if lower_case else ch
    if accents:
      out = "".join(c for c in unicodedata.normalize("NFD", out)
                    if unicodedata.category(c) != "Mn")
    if out != ch:
      keys.append(cp)
      values.append([ord(c) for c in out])
  width = max(map(len, values))
  table = np.full([len(keys), width], -1, np.int32)
  for row, value in enumerate(values):
    table[row, :len(value)] = value
  return np.array(keys, np.int32), table


def _replace_chars(chars: tf.RaggedTensor, replacements: tf.Tensor) -> tf.RaggedTensor:
  """Each character of `chars` [B, None] replaced by its row of `replacements`
  [N, width] (N = its number of characters, -1 padded)."""
  pieces = tf.ragged.boolean_mask(replacements, replacements >= 0)
  return tf.RaggedTensor.from_row_splits(pieces, chars.row_splits).merge_dims(1, 2)


def _pad(values: tf.Tensor, width: int) -> tf.Tensor:
  return tf.pad(values[:, None], [[0, 0], [0, width - 1]], constant_values=-1)


class GraphTokenizer(tf.Module):
  """Strings [B] -> ragged int32 WordPiece ids [B, None], as data_prep's Tokenizer."""

  def __init__(self, vocab_tokens: Sequence[str], lower_case: bool = True,
               accents: bool = True):
    super().__init__(name="tokenizer")
    action, python_space, not_word = _code_point_classes()
    self.lower_case, self.accents = lower_case, accents
    self._action_starts, self._actions = map(tf.constant, _runs(action))
    self._word_starts, self._word = map(tf.constant, _runs(~not_word))
    self._sigma = _sigma_pattern() if lower_case else None
    if lower_case or accents:
      keys, table = _char_map(lower_case, accents)
      self._map_keys, self._map_table = tf.constant(keys), tf.constant(table)
    # Python's str.split() whitespace: how --predict splits a tagging sentence.
    self.split_pattern = _re2_class(np.flatnonzero(python_space)) + "+"
    self._wordpiece = tf_text.FastWordpieceTokenizer(
        vocab=list(vocab_tokens), suffix_indicator="##",
        max_bytes_per_word=_MAX_WORD_BYTES, token_out_type=tf.int32,
        unknown_token=ref.UNK, no_pretokenization=False, support_detokenization=False)

  @staticmethod
  def _lookup(starts, values, cps):
    return tf.gather(values, tf.searchsorted(starts, cps, side="right") - 1)

  def normalize(self, text: tf.Tensor) -> tf.Tensor:
    """data_prep.tokenizer.normalize on a string tensor [B]."""
    chars = tf.strings.unicode_decode(text, "UTF-8", errors="replace",
                                      replacement_char=0xFFFD)
    cps = chars.flat_values
    action = self._lookup(self._action_starts, self._actions, cps)
    keep = tf.where(action == _DROP, -1, tf.where(action == _TO_SPACE, _SPACE, cps))
    cjk = action == _CJK
    step1 = tf.stack([tf.where(cjk, _SPACE, keep), tf.where(cjk, cps, -1),
                      tf.where(cjk, _SPACE, -1)], axis=1)
    chars = _replace_chars(chars, step1)
    if self._sigma:
      text = tf.strings.regex_replace(tf.strings.unicode_encode(chars, "UTF-8"),
                                      self._sigma, "\\1\u03c2\\2")
      chars = tf.strings.unicode_decode(text, "UTF-8")
    if self.lower_case or self.accents:
      cps = chars.flat_values
      index = tf.minimum(tf.searchsorted(self._map_keys, cps), len(self._map_keys) - 1)
      mapped = tf.equal(tf.gather(self._map_keys, index), cps)
      width = self._map_table.shape[1]
      chars = _replace_chars(chars, tf.where(mapped[:, None],
                                             tf.gather(self._map_table, index),
                                             _pad(cps, width)))
    return tf.strings.unicode_encode(self._mark_long_words(chars), "UTF-8")

  def _mark_long_words(self, chars: tf.RaggedTensor) -> tf.RaggedTensor:
    """Runs of over 200 word characters (neither space nor punctuation) -> U+E000."""
    cps = chars.flat_values
    word = tf.cast(self._lookup(self._word_starts, self._word, cps), tf.bool)
    row = chars.value_rowids()
    new_row = tf.concat([[True], row[1:] != row[:-1]], 0)
    run = tf.cumsum(tf.cast(~word | new_row, tf.int32)) - 1
    run_length = tf.math.unsorted_segment_sum(tf.cast(word, tf.int32), run, tf.size(run))
    long = word & (tf.gather(run_length, run) > ref.MAX_WORD_CHARS)
    previous_long = tf.concat([[False], long[:-1]], 0)
    first = long & ~(previous_long & ~new_row)
    out = tf.where(long[:, None], -1, _pad(cps, 3))
    out = tf.where(first[:, None], tf.constant([[_SPACE, _MARK, _SPACE]]), out)
    return _replace_chars(chars, out)

  def __call__(self, text: tf.Tensor) -> tf.RaggedTensor:
    """WordPiece ids [B, None] of a string tensor [B]."""
    return self._wordpiece.tokenize(self.normalize(text))
