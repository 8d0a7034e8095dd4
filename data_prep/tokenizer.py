"""The fast WordPiece tokenizer: BERT's rules, exactly, in Python and numpy only.

No TensorFlow, so that the data build's worker processes never import it (seconds of
start-up each); tensorflow-text's own normalizers differ from BERT's on thousands of
code points (control characters to spaces instead of dropped, compatibility mappings
such as "ª" -> "a", ICU case folding). The speed is C-level string operations over a
whole batch of lines, and WordPiece once per distinct word, its ids remembered.
tests/test_tokenization.py checks every code point against the plain-Python reference.

Fixed around the edges:
- Words over 200 characters become [UNK] in BERT; normalize() replaces them by a
  private-use character (which WordPiece maps to [UNK]), so that the split, the serving
  graph and basic_words see one short word.
- Text such as "[CLS]" is plain text for BERT ("[", "cl", "##s", "]"), here too.
"""

import functools
import re
import sys
import unicodedata
from typing import List, Sequence, Tuple

import numpy as np

from data_prep import reference_tokenizer as ref
from data_prep.vocab import Vocab

# One character that BERT would never keep (private use, category Co, dropped by its
# text cleaning) marks "a word over 200 characters" for the WordPiece step.
LONG_WORD_MARK = "\ue000"


def _char_class(member: np.ndarray) -> str:
  """A regex matching one character c where member[ord(c)] (a bool per code point).

  Python's re checks characters above U+FFFF against a class range by range, so the
  astral part sits behind a one-range guard that ordinary characters fail at once.
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
  """Character classes of BERT's rules, compiled once per process (get_patterns)."""

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
    self.non_ascii_punctuation = re.compile(_char_class(punctuation & (code_points >= 128)))
    self.long_word = re.compile(
        f"{_char_class(~(space | punctuation))}{{{ref.MAX_WORD_CHARS + 1},}}")


get_patterns = functools.cache(_Patterns)  # compiled at the first call


# Pure-ASCII text (most English) needs only byte operations: drop control characters,
# turn tab and carriage return into spaces, lower-case; a word is a run of letters and
# digits, as every other printable ASCII character is punctuation.
_ASCII_TABLE = bytes.maketrans(b"\t\r", b"  ")
_ASCII_DROPPED = bytes(cp for cp in list(range(32)) + [127] if chr(cp) not in "\t\n\r")
_ASCII_LONG_WORD = re.compile(rb"[A-Za-z0-9]{%d,}" % (ref.MAX_WORD_CHARS + 1))
_LONG_RUN = re.compile(r"\S{%d,}" % (ref.MAX_WORD_CHARS + 1))


def normalize(text: str, lower_case: bool = True, accents: bool = True) -> bytes:
  """BERT's basic tokenization up to (not including) the whitespace/punctuation split,
  as UTF-8; the lines of `text` stay separate."""
  if text.isascii():
    data = text.encode("ascii").translate(_ASCII_TABLE, _ASCII_DROPPED)
    if lower_case:
      data = data.lower()
    if len(data) > ref.MAX_WORD_CHARS:
      data = _ASCII_LONG_WORD.sub(f" {LONG_WORD_MARK} ".encode("utf-8"), data)
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
  p = get_patterns()
  text = p.space.sub(" ", p.dropped.sub("", text))
  text = p.cjk.sub(r" \g<0> ", text)
  if lower_case:
    text = text.lower()  # per word in BERT; the same, as spaces bound the context
    if accents:
      text = p.accent.sub("", unicodedata.normalize("NFD", text))
  if _LONG_RUN.search(text):
    text = p.long_word.sub(f" {LONG_WORD_MARK} ", text)
  return text.encode("utf-8")


# Distinct words whose ids a Tokenizer remembers; past it, it starts afresh, so memory
# stays bounded (about 50 MB) whatever the corpus.
CACHED_WORDS = 1 << 18
# Marks a line end among the words: a control character, which normalize() drops.
_LINE_END = b"\x01"
# Every printable ASCII character that is not a letter or digit; as bytes they never
# occur inside a UTF-8 multi-byte sequence, so they are found in UTF-8 text directly.
_ASCII_PUNCTUATION = [bytes([cp]) for cp in range(128) if ref.is_punctuation(chr(cp))]


def _space_punctuation(data: bytes) -> bytes:
  """Normalized UTF-8 lines with spaces around each punctuation mark: a whitespace split
  then gives BERT's words and marks (normalize() left " " and "\n" the only white space)."""
  for mark in _ASCII_PUNCTUATION:
    data = data.replace(mark, b" " + mark + b" ")
  if data.isascii():
    return data
  punctuation = get_patterns().non_ascii_punctuation
  return b"\n".join(
      line if line.isascii() else
      punctuation.sub(r" \g<0> ", line.decode("utf-8")).encode("utf-8")
      for line in data.split(b"\n"))


class _WordPieces(dict):
  """Word (UTF-8) -> row; row r's WordPiece ids are pieces[starts[r]:][:lengths[r]],
  computed when the word is first seen; row 0 is the line end. New rows wait in lists
  until flush(): one numpy write per batch, not per word."""

  def __init__(self, vocab: Vocab):
    super().__init__()
    self._ids = vocab.ids
    self.starts = np.zeros(1 << 12, np.int64)
    self.lengths = np.zeros(1 << 12, np.int64)
    self.pieces = np.zeros(1 << 14, np.int32)
    self._restart()

  def _restart(self):
    self.clear()
    self._rows = self._used = 0
    self._new_lengths, self._new_pieces = [], []
    self[_LINE_END] = self._add([])

  def bound(self):
    """Starts afresh past CACHED_WORDS words (between batches: rows stay valid within one)."""
    if len(self) > CACHED_WORDS:
      self._restart()

  def _add(self, ids: List[int]) -> int:
    self._new_lengths.append(len(ids))
    self._new_pieces += ids
    self._rows += 1
    return self._rows - 1

  def flush(self):
    lengths, pieces = self._new_lengths, self._new_pieces
    first, used = self._rows - len(lengths), self._used
    if len(self.starts) < self._rows:
      self.starts = np.resize(self.starts, 2 * self._rows)
      self.lengths = np.resize(self.lengths, 2 * self._rows)
    if len(self.pieces) < used + len(pieces):
      self.pieces = np.resize(self.pieces, 2 * (used + len(pieces)))
    self.lengths[first:self._rows] = lengths
    self.starts[first:self._rows] = used + np.cumsum(lengths) - lengths
    self.pieces[used:used + len(pieces)] = pieces
    self._used += len(pieces)
    self._new_lengths, self._new_pieces = [], []

  def __missing__(self, word: bytes) -> int:
    ids = self._ids
    row = self[word] = self._add([ids[piece] for piece in
                                  ref.wordpiece(word.decode("utf-8"), ids)])
    return row


class Tokenizer:
  """BERT WordPiece over batches of lines; ids identical to BERT's (the tests' reference)."""

  def __init__(self, vocab: Vocab, lower_case: bool = True, accents: bool = True):
    self.vocab = vocab
    self.lower_case, self.accents = lower_case, accents
    if LONG_WORD_MARK in vocab.ids:
      raise ValueError(f"{vocab.path}: holds U+E000, which this tokenizer reserves")
    self._words = _WordPieces(vocab)

  def batch_ids(self, lines: Sequence[str]) -> Tuple[np.ndarray, np.ndarray]:
    """Token ids of many lines (no "\\n" inside): flat int32 ids, and offsets: line i's
    ids are ids[offsets[i]:offsets[i + 1]]."""
    if not lines:
      return np.zeros([0], np.int32), np.zeros([1], np.int64)
    table = self._words
    table.bound()
    spaced = _space_punctuation(normalize("\n".join(lines), self.lower_case,
                                          self.accents))
    words = spaced.replace(b"\n", b" " + _LINE_END + b" ").split()
    # A dict lookup per word (C-level map), then numpy gathers each word's ids.
    rows = np.fromiter(map(table.__getitem__, words), np.int64, len(words))
    table.flush()
    lengths = table.lengths[rows]
    ends = np.cumsum(lengths)
    total = int(ends[-1]) if len(ends) else 0
    ids = table.pieces[np.repeat(table.starts[rows] - (ends - lengths), lengths)
                       + np.arange(total)]
    return ids, np.concatenate([[0], ends[rows == 0], [total]]).astype(np.int64)

  def ids(self, text: str) -> List[int]:
    ids, _ = self.batch_ids([text])
    return ids.tolist()

  def tokenize(self, text: str) -> List[str]:
    return [self.vocab.tokens[i] for i in self.ids(text)]


def basic_words(text: str, lower_case: bool = True, accents: bool = True) -> List[str]:
  """BERT's basic tokenization (words and punctuation marks), at C speed."""
  return _space_punctuation(normalize(text, lower_case, accents)).decode("utf-8").split()
