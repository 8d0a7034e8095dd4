"""Extractive question answering data: the tasks, SQuAD 1.1/2.0 JSON, JSON lines of
questions and MRQA jsonl read into questions, and their windows of [CLS] question [SEP]
context [SEP].

What is refused, and what an answer not found at its offset does: docs/finetuning.md,
"A question-answering task of your own".

The windows are the original's featurization: every word of the context is
WordPiece-tokenized on its own (so each piece knows its word), the question keeps
max_query_length pieces, and a longer context is covered by windows starting every
doc_stride pieces, each piece scored only in the window where it has the most context
(finetune/windows.py). The gold answer (the first found at its offset) is moved from
words to pieces and tightened to its own tokenized text's pieces ("(1895-1943)." ->
"1895"). A window without the whole answer, and every window of an unanswerable
question, points at [CLS] (position 0). numpy only: the exported models' reader
(deployed.py) ships this module.
"""

import dataclasses
import gzip
import json
import logging
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from data_prep.reference_tokenizer import is_cjk
from data_prep.tokenizer import Tokenizer
from finetune import layout, tfds_source
from finetune.windows import WordPieces, doc_spans, max_context_owner, text_ids
from finetune.errors import DataError, json_lines


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
  doc_tokens: Tuple[str, ...]   # the context's words (split_words)
  answers: Tuple[Answer, ...]   # gold answers found at their offsets; training uses [0]
  gold_texts: Tuple[str, ...]   # every gold answer text, for evaluation
  is_impossible: bool = False
  # Each gold answer whose text is not at its offset: where, and what the context holds.
  unmatched: Tuple[str, ...] = dataclasses.field(default=(), compare=False)


# What separates a context's words; U+202F (narrow no-break space) does in some SQuAD
# contexts.
WORD_SEPARATORS = " \t\r\n\u202f"


def split_words(context: str) -> Tuple[Tuple[str, ...], Tuple[int, ...]]:
  """The context's words and, for every character, the index of its word.

  Words are whitespace-separated, as in the original, but each CJK character is a word
  of its own, as BERT's tokenizer makes it a token: a context in Chinese, without
  spaces, would be one word, and an answer inside it would map to the first place its
  pieces occur. Whitespace maps to the preceding word (-1 before the first).
  """
  words, char_to_word, alone = [], [], True  # alone: the next character starts a word
  for char in context:
    if char in WORD_SEPARATORS:
      alone = True
    else:
      cjk = char >= "\u3400" and is_cjk(ord(char))
      if alone or cjk:
        words.append(char)
      else:
        words[-1] += char
      alone = cjk
    char_to_word.append(len(words) - 1)
  return tuple(words), tuple(char_to_word)


def _locate(text: str, start, context: str, char_to_word, where: str) -> Optional[Answer]:
  """The Answer at `start`, or None when the context holds other text there."""
  if not isinstance(start, int) or isinstance(start, bool) or \
      not isinstance(text, str) or not text:
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
  return QAExample(eid=eid, qid=str(qid), question=question, context=context,
                   doc_tokens=words, answers=tuple(a for a in located if a is not None),
                   gold_texts=tuple(text for text, _ in answers),
                   is_impossible=is_impossible,
                   unmatched=tuple(f"{where}: answer {text!r} at {start}, where the "
                                   f"context reads {context[start:start + len(text)]!r}"
                                   for (text, start), a in zip(answers, located)
                                   if a is None))


@dataclasses.dataclass(frozen=True)
class QATask:
  name: str                   # canonical, e.g. "squad/v1.1"
  folders: Tuple[str, ...]    # accepted folder names under finetuning_data/
  file_format: str            # "squad" (SQuAD JSON or JSON lines) or "mrqa" (jsonl)
  v2: bool = False            # has unanswerable questions
  aliases: Tuple[str, ...] = ()
  eval_splits: Tuple[str, ...] = ("dev",)
  test_splits: Tuple[str, ...] = ()
  train_split: str = "train"
  metrics: Tuple[str, ...] = ("exact_match", "f1")
  tfds_name: Optional[str] = None
  # A user's task (its task file, family.py): the path of each split's file.
  files: Dict[str, str] = dataclasses.field(default_factory=dict)


QA_TASKS = (
    QATask("squad/v1.1", ("squadv1",), "squad", aliases=("squadv1",),
           tfds_name="squad/v1.1"),
    # Like the original, only SQuAD 2.0 writes test-set answers (write_test_outputs).
    QATask("squad/v2.0", ("squad",), "squad", v2=True, aliases=("squad",),
           test_splits=("test",), tfds_name="squad/v2.0"),
    # MRQA 2019 shared task files, named as TFDS names them; the original's names as aliases.
    QATask("mrqa/news_qa", ("newsqa",), "mrqa", aliases=("newsqa",)),
    QATask("mrqa/natural_questions", ("naturalqs",), "mrqa", aliases=("naturalqs",)),
    QATask("mrqa/trivia_qa", ("triviaqa",), "mrqa", aliases=("triviaqa",)),
    QATask("mrqa/search_qa", ("searchqa",), "mrqa", aliases=("searchqa",)),
)


def _text(record, key: str, where: str) -> str:
  """A question's or context's text, refused naming the field when missing or empty."""
  value = record.get(key)
  if not isinstance(value, str) or not value.strip():
    raise DataError(f"{where}: " + (f"empty {key}" if isinstance(value, str) else
                                    f"no \"{key}\" text"))
  return value


def _answer_pairs(record, where: str) -> List[Tuple[str, int]]:
  """(text, offset) of a question's gold answers: SQuAD's list of {"text",
  "answer_start"}, or Hugging Face datasets' {"text": [...], "answer_start": [...]}."""
  if "answers" not in record:
    raise DataError(f"{where}: no \"answers\" (an empty list for a question without "
                    "an answer)")
  answers = record["answers"]
  if isinstance(answers, dict) and isinstance(answers.get("text"), list) and \
      isinstance(answers.get("answer_start"), list) and \
      len(answers["text"]) == len(answers["answer_start"]):
    return list(zip(answers["text"], answers["answer_start"]))
  if isinstance(answers, list) and all(isinstance(a, dict) and "text" in a and
                                       "answer_start" in a for a in answers):
    return [(a["text"], a["answer_start"]) for a in answers]
  raise DataError(f"{where}: \"answers\" must be a list of {{\"text\", \"answer_start\"}} "
                  "or {\"text\": [...], \"answer_start\": [...]} of equal lengths")


def _question(task: QATask, eid: int, qid, record, context: str, words, char_to_word,
              labelled: bool, where: str) -> QAExample:
  """One question of `record` on `context` (its answers ignored when not `labelled`)."""
  question = _text(record, "question", where)
  if not labelled:
    return make_example(eid, qid, question, context, words, char_to_word, [], False, where)
  pairs = _answer_pairs(record, where)
  is_impossible = bool(record.get("is_impossible", False)) or not pairs
  if is_impossible and not task.v2:
    hint = ("give \"unanswerable\": true in its task file" if task.files else
            "SQuAD 2.0 data needs squad/v2.0")
    raise DataError(f"{where}: no answers ({task.name} has no unanswerable questions; "
                    f"{hint})")
  if is_impossible:
    pairs = []  # v2.0 keeps the would-be answers apart, as plausible_answers
  return make_example(eid, qid, question, context, words, char_to_word, pairs,
                      is_impossible, where)


def _squad_examples(task: QATask, document, path: str,
                    labelled: bool = True) -> Iterator[QAExample]:
  """The questions of a document in the official SQuAD JSON layout (their answers
  ignored when not `labelled`: questions to predict)."""
  if not isinstance(document, dict) or not isinstance(document.get("data"), list):
    raise DataError(f"{path}: expected a SQuAD JSON object with a \"data\" list of "
                    "articles, or JSON lines of {\"question\", \"context\", ...}")
  eid = 0
  for a, article in enumerate(document["data"]):
    for p, paragraph in enumerate(article.get("paragraphs", [])):
      where = f"{path}: article {a} paragraph {p}"
      if not isinstance(paragraph, dict) or not isinstance(paragraph.get("qas"), list):
        raise DataError(f"{where}: expected an object with \"context\" and \"qas\"")
      context = _text(paragraph, "context", where)
      words, char_to_word = split_words(context)
      for q, qa in enumerate(paragraph["qas"]):
        qid = qa.get("id") if isinstance(qa, dict) else None
        at = f"{where} question {q if qid is None else qid}"
        if not isinstance(qa, dict):
          raise DataError(f"{at}: expected an object with \"id\", \"question\" and "
                          "\"answers\"")
        if labelled and qid is None:
          raise DataError(f"{at}: no \"id\" (each question needs one of its own)")
        yield _question(task, eid, str(eid) if qid is None else qid, qa, context, words,
                        char_to_word, labelled, at)
        eid += 1


def _mrqa_examples(path: str) -> Iterator[QAExample]:
  """MRQA jsonl: a header line, then one paragraph with its questions per line."""
  eid = 0
  # The MRQA release ships gzipped files; either form is read.
  opener = gzip.open if path.endswith(".gz") else open
  for line_number, paragraph in json_lines(path, opener):
    if not isinstance(paragraph, dict):
      raise DataError(f"{path}:{line_number}: expected a JSON object per line")
    if "header" in paragraph:
      continue
    where = f"{path}:{line_number}"
    context = _text(paragraph, "context", where)
    words, char_to_word = split_words(context)
    for qa in paragraph.get("qas", []):
      try:
        # char_spans are inclusive [first, last] character offsets.
        pairs = [(answer["text"], answer["char_spans"][0][0])
                 for answer in qa["detected_answers"]]
        qid, question = qa["qid"], qa["question"]
      except (KeyError, IndexError, TypeError):
        raise DataError(f"{where}: each question needs \"qid\", \"question\" and "
                        "\"detected_answers\" with \"text\" and \"char_spans\"") from None
      if not pairs:
        raise DataError(f"{where}: question {qid} has no detected answers")
      example = make_example(eid, qid, question, context, words, char_to_word, pairs,
                             False, f"{where} question {qid}")
      # Evaluation scores against every listed answer string, not only located ones.
      yield dataclasses.replace(example, gold_texts=tuple(qa.get("answers", [])) or
                                example.gold_texts)
      eid += 1


def _line_examples(task: QATask, path: str, labelled: bool) -> Iterator[QAExample]:
  """JSON lines of {"question", "context"[, "id"][, "answers"]}, one question each
  (labelled: "answers" as _answer_pairs reads them, empty for no answer)."""
  eid = 0
  for line_number, record in json_lines(path):
    where = f"{path}:{line_number}"
    if not isinstance(record, dict):
      raise DataError(f"{where}: expected a JSON object with \"question\" and "
                      "\"context\"")
    context = _text(record, "context", where)
    yield _question(task, eid, record.get("id", str(line_number - 1)), record, context,
                    *split_words(context), labelled, where)
    eid += 1


def _file_examples(task: QATask, path: str, labelled: bool) -> Iterator[QAExample]:
  """The questions of a SQuAD JSON document or of JSON lines (one question per line),
  told apart by the file's first line."""
  try:
    with open(path, encoding="utf-8") as f:
      first = next((line for line in f if line.strip()), "")
      if not first:
        raise DataError(f"{path}: empty file; expected a SQuAD JSON document or JSON "
                        "lines of questions")
      try:
        record = json.loads(first)
        is_lines = isinstance(record, dict) and ("question" in record or
                                                 "context" in record)
      except json.JSONDecodeError:
        is_lines = False  # a SQuAD document spread over several lines
      if is_lines:
        return _line_examples(task, path, labelled)
      f.seek(0)
      return _squad_examples(task, json.load(f), path, labelled)
  except json.JSONDecodeError as e:
    raise DataError(f"{path}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from None
  except UnicodeDecodeError as e:
    raise DataError(f"{path}: not UTF-8 text (byte {e.start})") from None


def read_questions(path: str) -> Iterator[QAExample]:
  """Questions to answer, without gold answers: JSON lines of {"question", "context"
  [, "id"]} (read as they come), or a document in the SQuAD JSON layout."""
  return _file_examples(QATask("questions", (), "squad", v2=True), path, labelled=False)


def has_unanswerable(path: str) -> bool:
  """Whether a file of questions holds one without an answer (SQuAD 2.0-style)."""
  probe = QATask("probe", (), "squad", v2=True)
  return any(e.is_impossible for e in _file_examples(probe, path, labelled=True))


def split_file(task: QATask, data_dir: str, split: str) -> str:
  if task.files:
    return layout.own_file(task.files, split, task.name)
  if task.file_format == "squad":
    return layout.find_split_file(data_dir, task.name, split, task.folders,
                                  [split + ".json"], "official SQuAD JSON format")
  return layout.find_split_file(data_dir, task.name, split, task.folders,
                                [split + ".jsonl", split + ".jsonl.gz"], "MRQA jsonl format")


def read_file(task: QATask, path: str, split: str = "") -> List[QAExample]:
  """All questions of one file: SQuAD JSON or JSON lines, or MRQA jsonl (MRQA tasks); a
  test split's without their answers."""
  if task.file_format == "mrqa":
    return _checked(_mrqa_examples(path), path)
  return _checked(_file_examples(task, path, split not in task.test_splits), path)


def _checked(read: Iterator[QAExample], source: str) -> List[QAExample]:
  """All examples; none, or two sharing an id (scores are kept by id), refused."""
  examples, seen = [], set()
  for example in read:
    if example.qid in seen:
      raise DataError(f"{source}: question id {example.qid!r} is given twice; each "
                      "question needs an id of its own")
    seen.add(example.qid)
    examples.append(example)
  if not examples:
    raise DataError(f"{source}: no questions")
  return examples


def read_tfds(task: QATask, split: str, builder) -> List[QAExample]:
  tfds_split = {"train": "train", "dev": "validation"}.get(split, split)
  paragraphs = []
  for record in tfds_source.records(builder, tfds_split):
    answers = record["answers"]
    qa = {"id": record["id"].decode(), "question": record["question"].decode(),
          "is_impossible": bool(record.get("is_impossible", False)),
          "answers": [{"text": t.decode(), "answer_start": int(s)}
                      for t, s in zip(answers["text"], answers["answer_start"])]}
    context = record["context"].decode()
    # TFDS stores one record per question; questions on one paragraph come together.
    if paragraphs and paragraphs[-1]["context"] == context:
      paragraphs[-1]["qas"].append(qa)
    else:
      paragraphs.append({"context": context, "qas": [qa]})
  source = f"TFDS {task.tfds_name} {tfds_split}"
  return _checked(_squad_examples(task, {"data": [{"paragraphs": paragraphs}]}, source),
                  source)


@dataclasses.dataclass
class Windows:
  """Model inputs of every window and what post-processing needs to read them back."""
  arrays: Dict[str, np.ndarray]  # input_ids, input_mask, segment_ids, start_positions,
                                 # end_positions, is_impossible: [N, ...] model features
  example_index: np.ndarray      # [N] the example (position in the list) of each window
  token_to_word: np.ndarray      # [N, L] word of example.doc_tokens, -1 outside the context
  max_context: np.ndarray        # [N, L] whether this window is the piece's best one
  unmapped_answers: int = 0      # gold answers that cover no word piece


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
  if doc_stride < 1:
    raise ValueError(f"doc_stride {doc_stride}: windows must advance by at least 1 piece")
  vocab = tokenizer.vocab
  words = WordPieces(tokenizer, {e.context: e.doc_tokens for e in examples}.values())
  questions = text_ids(tokenizer, [" ".join(e.question.split()) for e in examples])
  answered = [i for i, e in enumerate(examples) if e.answers and not e.is_impossible]
  answer_pieces = dict(zip(answered, text_ids(
      tokenizer, [" ".join(examples[i].answers[0].text.split()) for i in answered])))

  # Per window: (example index, question pieces, start and length in the context,
  # which of its pieces it owns, the answer's piece span in the context or None, the
  # context's pieces and the word of each).
  rows = []
  unmapped, context = 0, None
  for index, example in enumerate(examples):
    if example.context != context:  # examples come by paragraph
      context = example.context
      pieces, word_first, counts = words.pieces(example.doc_tokens)
      tok_to_word = np.repeat(np.arange(len(counts)), counts)
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
                   answer_span, pieces, tok_to_word))
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
  for i, (index, query, start, length, owned, answer_span, pieces,
          tok_to_word) in enumerate(rows):
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
