"""The fast WordPiece tokenizer: BERT's rules, exactly, at C speed.

Choice (measured, see bench/RESULTS.md): tensorflow-text's FastBertTokenizer differs from
BERT on thousands of code points, because its normalizer is not BERT's (it maps control
characters to spaces instead of dropping them, and applies compatibility mappings such as
"ª" -> "a" or full-width digits -> ASCII). BertTokenizer case-folds with ICU (NFKC
casefold), which differs from Python's str.lower() too. So BERT's text normalization runs
here, in Python but only through C-level string operations (bytes.translate and lower
for ASCII text; str.lower, unicodedata.normalize and precompiled character-class regexes
otherwise; one pass each over a whole batch of lines), and FastWordpieceTokenizer does the rest in C++: splitting on whitespace,
punctuation and greedy longest-match WordPiece, which match BERT's on every code point
(tests/test_tokenization.py checks all of them).

Fixed around the edges:
- Words over 200 characters become [UNK] in BERT; FastWordpieceTokenizer only knows a byte
  limit. Such words are replaced by a private-use character before it runs, which it maps
  to [UNK], and its byte limit is set above 200 characters of UTF-8.
- Text such as "[CLS]" is plain text for BERT ("[", "cl", "##s", "]"); FastWordpieceTokenizer
  agrees, as long as no token is declared special (none is).
"""

import re
import sys
import unicodedata
from typing import List, Sequence, Tuple

import numpy as np

from data_prep import reference_tokenizer as ref
from data_prep.vocab import Vocab

# One character that BERT would never keep (private use, category Co, dropped by its
# text cleaning) marks "a word over 200 characters" for the WordPiece step.
_LONG_WORD_MARK = "\ue000"
_MAX_WORD_BYTES = 4 * ref.MAX_WORD_CHARS + 4


def _char_class(member: np.ndarray) -> str:
  """A regex matching one character c where member[ord(c)] (a bool per code point).

  Python's re checks characters above U+FFFF against a class range by range, which makes
  a class like "all control characters" 20x slower on ordinary text; so the astral part
  sits behind a one-range guard that ordinary characters fail at once.
  """
  def body(lo, hi):
    flags = np.concatenate([[False], member[lo:hi], [False]])
    edges = np.flatnonzero(flags[1:] != flags[:-1]) + lo
    return "".join(re.escape(chr(a)) if a == b - 1 else
                   f"{re.escape(chr(a))}-{re.escape(chr(b - 1))}"
                   for a, b in zip(edges[::2], edges[1::2]))
  branches = []
  if member[:0x10000].any():
    branches.append(f"[{body(0, 0x10000)}]")
  if member[0x10000:].any():
    branches.append(f"(?=[\\U00010000-\\U0010ffff])[{body(0x10000, len(member))}]")
  return "(?:" + "|".join(branches) + ")"


class _Patterns:
  """Character classes of BERT's rules, compiled once per process (about a second)."""

  def __init__(self):
    code_points = np.arange(sys.maxunicode + 1)
    category = np.array([unicodedata.category(chr(cp)) for cp in code_points])
    in_text = lambda chars: np.isin(code_points, [ord(ch) for ch in chars])
    control = (np.char.startswith(category, "C") & ~in_text("\t\n\r"))
    space = (np.isin(code_points, [cp for cp in range(sys.maxunicode + 1)
                                   if chr(cp).isspace()]) | (category == "Zs")) & ~control
    punctuation = np.char.startswith(category, "P") | np.isin(
        code_points, [cp for cp in range(128) if ref.is_punctuation(chr(cp))])
    cjk = np.zeros_like(control)
    for lo, hi in ref.CJK_RANGES:
      cjk[lo:hi + 1] = True
    self.dropped = re.compile(_char_class(control | in_text("\x00\ufffd")))
    # BERT's whitespace plus what str.split() also splits on (U+2028, U+2029), except the
    # newline that separates the lines of a batch here.
    self.space = re.compile(_char_class(space & ~in_text("\n")))
    self.cjk = re.compile(_char_class(cjk))
    self.accent = re.compile(_char_class(category == "Mn"))
    self.punctuation = _char_class(punctuation)
    self.word = None  # compiled on first use by basic_words
    self.long_word = re.compile(
        f"{_char_class(~(space | punctuation))}{{{ref.MAX_WORD_CHARS + 1},}}")


_patterns = None


def _get_patterns() -> _Patterns:
  global _patterns
  if _patterns is None:
    _patterns = _Patterns()
  return _patterns


# Pure-ASCII text (most English) needs only byte operations: drop control characters,
# turn tab and carriage return into spaces, lower-case; a word is a run of letters and
# digits, as every other printable ASCII character is punctuation.
_ASCII_TABLE = bytes.maketrans(b"\t\r", b"  ")
_ASCII_DROPPED = bytes(cp for cp in list(range(32)) + [127] if chr(cp) not in "\t\n\r")
_ASCII_LONG_WORD = re.compile(rb"[A-Za-z0-9]{%d,}" % (ref.MAX_WORD_CHARS + 1))
_LONG_RUN = re.compile(r"\S{%d,}" % (ref.MAX_WORD_CHARS + 1))


def normalize(text: str, lower_case: bool = True, accents: bool = True) -> bytes:
  """BERT's basic tokenization up to (not including) the whitespace/punctuation split.

  Returns UTF-8. `text` may hold several lines separated by "\\n"; they stay separate.
  Words over 200 characters are replaced by a marker that WordPiece turns into [UNK].
  """
  if text.isascii():
    data = text.encode("ascii").translate(_ASCII_TABLE, _ASCII_DROPPED)
    if lower_case:
      data = data.lower()
    if len(data) > ref.MAX_WORD_CHARS:
      data = _ASCII_LONG_WORD.sub(f" {_LONG_WORD_MARK} ".encode("utf-8"), data)
    return data
  if "\n" in text:  # mostly-ASCII batches: only the lines that need it take the slow path
    parts, ascii_run = [], []
    for line in text.split("\n"):
      if line.isascii():
        ascii_run.append(line)
        continue
      if ascii_run:
        parts.append(normalize("\n".join(ascii_run), lower_case, accents))
        ascii_run = []
      parts.append(normalize(line, lower_case, accents))
    if ascii_run:
      parts.append(normalize("\n".join(ascii_run), lower_case, accents))
    return b"\n".join(parts)
  p = _get_patterns()
  text = p.space.sub(" ", p.dropped.sub("", text))
  text = p.cjk.sub(r" \g<0> ", text)
  if lower_case:
    text = text.lower()  # per word in BERT; the same, as spaces bound the context
    if accents:
      text = p.accent.sub("", unicodedata.normalize("NFD", text))
  if _LONG_RUN.search(text):
    text = p.long_word.sub(f" {_LONG_WORD_MARK} ", text)
  return text.encode("utf-8")


class Tokenizer:
  """BERT WordPiece over batches of lines; ids identical to ReferenceTokenizer's."""

  def __init__(self, vocab: Vocab, lower_case: bool = True, accents: bool = True):
    import tensorflow as tf
    import tensorflow_text as tf_text
    self._tf = tf
    self.vocab = vocab
    self.lower_case, self.accents = lower_case, accents
    if _LONG_WORD_MARK in vocab.ids:
      raise ValueError(f"{vocab.path}: holds U+E000, which this tokenizer reserves")
    self._wordpiece = tf_text.FastWordpieceTokenizer(
        vocab=list(vocab.tokens), suffix_indicator="##", max_bytes_per_word=_MAX_WORD_BYTES,
        token_out_type=tf.int32, unknown_token=ref.UNK, no_pretokenization=False,
        support_detokenization=False)

  def normalize(self, text: str) -> bytes:
    return normalize(text, self.lower_case, self.accents)

  def batch_ids(self, lines: Sequence[str]) -> Tuple[np.ndarray, np.ndarray]:
    """Token ids of many lines (no "\\n" inside): flat int32 ids and row offsets.

    Line i's ids are ids[offsets[i]:offsets[i + 1]].
    """
    if not lines:
      return np.zeros([0], np.int32), np.zeros([1], np.int64)
    normalized = self.normalize("\n".join(lines)).split(b"\n")
    ragged = self._wordpiece.tokenize(self._tf.constant(normalized))
    return ragged.flat_values.numpy(), ragged.row_splits.numpy()

  def ids(self, text: str) -> List[int]:
    ids, _ = self.batch_ids([text])
    return ids.tolist()

  def tokenize(self, text: str) -> List[str]:
    return [self.vocab.tokens[i] for i in self.ids(text)]


_ASCII_WORD = re.compile(r"[A-Za-z0-9]+|[^A-Za-z0-9\s]")


def basic_words(text: str, lower_case: bool = True, accents: bool = True) -> List[str]:
  """BERT's basic tokenization (words and punctuation marks), at C speed.

  A word over 200 characters comes back as the private-use marker, never a real token.
  """
  normalized = normalize(text, lower_case, accents).decode("utf-8")
  if normalized.isascii():
    return _ASCII_WORD.findall(normalized)
  p = _get_patterns()
  if p.word is None:
    p.word = re.compile(f"{p.punctuation}|(?:(?!{p.punctuation})\\S)+")
  return p.word.findall(normalized)
