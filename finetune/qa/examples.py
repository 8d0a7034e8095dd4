"""A question and its context as the QA family reads them: the context split into
words at whitespace as the original does, each gold answer located by its character
offset and mapped to the words it covers. Standard library only: the exported models'
reader (export/reader.py) ships this module.
"""

import dataclasses
from typing import Optional, Tuple

from finetune.errors import DataError


@dataclasses.dataclass(frozen=True)
class Answer:
  text: str
  start: int        # character offset in the context
  start_word: int   # index in QAExample.doc_tokens of the first word it touches
  end_word: int     # ... and of the last (inclusive)


@dataclasses.dataclass(frozen=True)
class QAExample:
  eid: int
  qid: str
  question: str
  context: str
  doc_tokens: Tuple[str, ...]   # the context split at whitespace
  answers: Tuple[Answer, ...]   # gold answers found at their offsets; training uses [0]
  gold_texts: Tuple[str, ...]   # every gold answer text, for evaluation
  is_impossible: bool = False
  unmatched_answers: int = 0    # gold answers whose text is not at their offset


# What separates a context's words; U+202F (narrow no-break space) does in some SQuAD
# contexts.
WORD_SEPARATORS = " \t\r\n\u202f"


def _is_whitespace(char: str) -> bool:
  return char in WORD_SEPARATORS


def split_words(context: str) -> Tuple[Tuple[str, ...], Tuple[int, ...]]:
  """Whitespace-separated words and, for every character, the index of its word.

  Whitespace maps to the preceding word (-1 before the first), as in the original.
  """
  words, char_to_word, in_space = [], [], True
  for char in context:
    if _is_whitespace(char):
      in_space = True
    else:
      if in_space:
        words.append(char)
      else:
        words[-1] += char
      in_space = False
    char_to_word.append(len(words) - 1)
  return tuple(words), tuple(char_to_word)


def _locate(text: str, start, context: str, char_to_word, where: str) -> Optional[Answer]:
  """The Answer at `start`, or None when the context holds other text there."""
  if not isinstance(start, int) or isinstance(start, bool) or not text:
    raise DataError(f"{where}: an answer needs a non-empty \"text\" and an integer "
                    f"offset, got text {text!r} at {start!r}")
  if not 0 <= start or start + len(text) > len(context):
    raise DataError(f"{where}: answer {text!r} at offset {start} runs outside the "
                    f"context ({len(context)} characters)")
  if context[start:start + len(text)] != text:
    return None
  return Answer(text, start, max(char_to_word[start], 0),
                char_to_word[start + len(text) - 1])


def make_example(eid, qid, question, context, words, char_to_word, answers, is_impossible,
             where) -> QAExample:
  if not isinstance(question, str) or not question.strip():
    raise DataError(f"{where}: empty question")
  located = [_locate(text, start, context, char_to_word, where) for text, start in answers]
  found = tuple(a for a in located if a is not None)
  return QAExample(eid=eid, qid=str(qid), question=question, context=context,
                   doc_tokens=words, answers=found,
                   gold_texts=tuple(text for text, _ in answers),
                   is_impossible=is_impossible,
                   unmatched_answers=len(located) - len(found))
