"""BERT's WordPiece tokenization rules in plain Python, as ELECTRA's release applies them:
which characters are control, punctuation or CJK ideographs, accent stripping (NFD, Mn
marks dropped), and greedy longest-match-first WordPiece with "##" continuations (a word
longer than 200 characters, or one with no match, becomes [UNK]). The fast tokenizer
(data_prep/tokenizer.py) and the serving graph's are built on them; the tests' reference
(tests/reference_tokenizer.py) applies them a character at a time.
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


def is_control(ch: str) -> bool:
  # Tab, newline and carriage return are Cc but count as whitespace.
  return ch not in "\t\n\r" and unicodedata.category(ch).startswith("C")


def is_punctuation(ch: str) -> bool:
  cp = ord(ch)
  # Every non-alphanumeric printable ASCII character counts, even "$" or "^" (not P*).
  if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
    return True
  return unicodedata.category(ch).startswith("P")


def strip_accents(text: str) -> str:
  return "".join(ch for ch in unicodedata.normalize("NFD", text)
                 if unicodedata.category(ch) != "Mn")


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

