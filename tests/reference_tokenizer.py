"""BERT's whole tokenization in plain Python, character by character: the reference the
fast tokenizer (data_prep/tokenizer.py) must match, over the rules it shares
(data_prep/reference_tokenizer.py). Slow; used by the tests and by the data benchmark's
pure-Python pipeline.

Written from BERT's published tokenization rules as ELECTRA's release applies them:
clean the text (drop NUL, U+FFFD and control characters, map whitespace to spaces), put
spaces around CJK ideographs, split on whitespace, optionally lower-case (and then, as in
ELECTRA's release, optionally strip accents through NFD), split punctuation off, and run
greedy longest-match-first WordPiece with "##" continuations.
"""

import unicodedata
from typing import Dict, List

from data_prep.reference_tokenizer import (MAX_WORD_CHARS, is_cjk, is_control,  # pylint: disable=unused-import
                                           is_punctuation, strip_accents, wordpiece)


def is_whitespace(ch: str) -> bool:
  return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def clean_text(text: str) -> str:
  out = []
  for ch in text:
    if ch == "\x00" or ch == "\ufffd" or is_control(ch):
      continue
    out.append(" " if is_whitespace(ch) else ch)
  return "".join(out)


def space_cjk(text: str) -> str:
  return "".join(f" {ch} " if is_cjk(ord(ch)) else ch for ch in text)


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
