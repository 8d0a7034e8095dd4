"""BERT's WordPiece tokenization rules in plain Python: the reference the fast path must match.

Written from BERT's published tokenization rules as ELECTRA's release applies them:
clean the text (drop NUL, U+FFFD and control characters, map whitespace to spaces), put
spaces around CJK ideographs, split on whitespace, optionally lower-case (and then, as in
ELECTRA's release, optionally strip accents through NFD), split punctuation off, and run
greedy longest-match-first WordPiece with "##" continuations; a word longer than 200
characters, or one with no match, becomes [UNK]. It is slow (a Python loop per
character) and serves the tests, the benchmark's pure-Python pipeline, and the rare lines
the fast tokenizer cannot handle exactly (data_prep/tokenizer.py says which).
"""

import unicodedata
from typing import Dict, List

UNK = "[UNK]"
MAX_WORD_CHARS = 200

# CJK ideograph blocks that BERT splits into single characters (Hangul, kana are not).
CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
               (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def is_cjk(cp: int) -> bool:
  return cp >= 0x3400 and any(lo <= cp <= hi for lo, hi in CJK_RANGES)


def is_whitespace(ch: str) -> bool:
  return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def is_control(ch: str) -> bool:
  # Tab, newline and carriage return are Cc but count as whitespace.
  return ch not in "\t\n\r" and unicodedata.category(ch).startswith("C")


def is_punctuation(ch: str) -> bool:
  cp = ord(ch)
  # Every non-alphanumeric printable ASCII character counts, even "$" or "^" (not P*).
  if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
    return True
  return unicodedata.category(ch).startswith("P")


def clean_text(text: str) -> str:
  out = []
  for ch in text:
    if ch == "\x00" or ch == "\ufffd" or is_control(ch):
      continue
    out.append(" " if is_whitespace(ch) else ch)
  return "".join(out)


def space_cjk(text: str) -> str:
  return "".join(f" {ch} " if is_cjk(ord(ch)) else ch for ch in text)


def strip_accents(text: str) -> str:
  return "".join(ch for ch in unicodedata.normalize("NFD", text)
                 if unicodedata.category(ch) != "Mn")


def split_punctuation(word: str) -> List[str]:
  pieces, current = [], []
  for ch in word:
    if is_punctuation(ch):
      if current:
        pieces.append("".join(current))
        current = []
      pieces.append(ch)
    else:
      current.append(ch)
  if current:
    pieces.append("".join(current))
  return pieces


def basic_tokenize(text: str, lower_case: bool = True, accents: bool = True) -> List[str]:
  """Words and punctuation marks, before WordPiece.

  `accents=True` strips accents, and only when lower-casing (ELECTRA's release nests the
  accent stripping under do_lower_case).
  """
  words = []
  # str.split() (no argument) also splits on U+2028/U+2029 and similar, as BERT's does.
  for word in space_cjk(clean_text(text)).split():
    if lower_case:
      word = word.lower()
      if accents:
        word = strip_accents(word)
    words.extend(split_punctuation(word))
  return " ".join(words).split()


def wordpiece(word: str, vocab: Dict[str, int]) -> List[str]:
  """Greedy longest-match-first pieces of one word, or [UNK]."""
  if len(word) > MAX_WORD_CHARS:
    return [UNK]
  pieces, start = [], 0
  while start < len(word):
    end = len(word)
    while end > start:
      piece = word[start:end] if start == 0 else "##" + word[start:end]
      if piece in vocab:
        break
      end -= 1
    else:
      return [UNK]
    pieces.append(piece)
    start = end
  return pieces


class ReferenceTokenizer:
  """The whole pipeline, like BERT's FullTokenizer: text -> WordPiece tokens and ids."""

  def __init__(self, vocab: Dict[str, int], lower_case: bool = True, accents: bool = True):
    self.vocab = vocab
    self.lower_case, self.accents = lower_case, accents

  def tokenize(self, text: str) -> List[str]:
    return [piece for word in basic_tokenize(text, self.lower_case, self.accents)
            for piece in wordpiece(word, self.vocab)]

  def ids(self, text: str) -> List[int]:
    return [self.vocab[token] for token in self.tokenize(text)]
