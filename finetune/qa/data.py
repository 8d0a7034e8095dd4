"""Extractive question answering data: SQuAD 1.1/2.0 JSON and MRQA jsonl readers.

Owns the QA task definitions and the readers that turn the official files into
`QAExample`s: the context split into whitespace-separated words as the original does,
every gold answer located by its character offset and mapped to the words it covers.
An answer whose text is not found at its offset is counted and reported, not fatal (the
original drops such answers from training); malformed JSON, empty contexts or questions,
and impossible offsets are errors naming the file and position. WordPiece featurization
happens elsewhere.
"""

import dataclasses
import gzip
import json
import logging
from typing import Iterator, List, Optional, Tuple

from finetune import layout, tfds_source
from finetune.errors import DataError
from finetune.qa.examples import QAExample, make_example, split_words


@dataclasses.dataclass(frozen=True)
class QATask:
  name: str                   # canonical, e.g. "squad/v1.1"
  folders: Tuple[str, ...]    # accepted folder names under finetuning_data/
  file_format: str            # "squad" (one JSON document) or "mrqa" (jsonl)
  v2: bool = False            # has unanswerable questions
  aliases: Tuple[str, ...] = ()
  eval_splits: Tuple[str, ...] = ("dev",)
  test_splits: Tuple[str, ...] = ()
  train_split: str = "train"
  metrics: Tuple[str, ...] = ("exact_match", "f1")
  tfds_name: Optional[str] = None


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


def _check_context(context, where: str) -> str:
  if not isinstance(context, str) or not context.strip():
    raise DataError(f"{where}: empty context")
  return context


def _load_squad_json(path: str):
  try:
    with open(path, encoding="utf-8") as f:
      return json.load(f)
  except json.JSONDecodeError as e:
    raise DataError(f"{path}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from None
  except UnicodeDecodeError as e:
    raise DataError(f"{path}: not UTF-8 text (byte {e.start})") from None


def _squad_examples(task: QATask, document, path: str,
                    labelled: bool = True) -> Iterator[QAExample]:
  """The questions of a document in the official SQuAD JSON layout (their answers
  ignored when not `labelled`: questions to predict)."""
  if not isinstance(document, dict) or not isinstance(document.get("data"), list):
    raise DataError(f"{path}: expected a SQuAD JSON object with a \"data\" list of "
                    "articles")
  eid = 0
  for a, article in enumerate(document["data"]):
    for p, paragraph in enumerate(article.get("paragraphs", [])):
      where = f"{path}: article {a} paragraph {p}"
      try:
        context = _check_context(paragraph.get("context"), where)
        questions = paragraph["qas"]
      except (KeyError, AttributeError, TypeError):
        raise DataError(f"{where}: expected an object with \"context\" and \"qas\"") \
            from None
      words, char_to_word = split_words(context)
      for qa in questions:
        if not labelled:
          if not isinstance(qa, dict) or "question" not in qa:
            raise DataError(f"{where}: each question needs a \"question\"")
          yield make_example(eid, qa.get("id", str(eid)), qa["question"], context,
                             words, char_to_word, [], False, f"{where} question {eid}")
          eid += 1
          continue
        try:
          qid, question, answers = qa["id"], qa["question"], qa.get("answers", [])
          pairs = [(answer["text"], answer["answer_start"]) for answer in answers]
        except (KeyError, TypeError):
          raise DataError(f"{where}: each question needs \"id\", \"question\" and "
                          "\"answers\" of {\"text\", \"answer_start\"}") from None
        is_impossible = bool(qa.get("is_impossible", False)) or not pairs
        if is_impossible and not task.v2:
          raise DataError(f"{where}: question {qid} has no answers ({task.name} has no "
                          "unanswerable questions; SQuAD 2.0 data needs squad/v2.0)")
        if is_impossible:
          pairs = []  # v2.0 keeps the would-be answers apart, as plausible_answers
        yield make_example(eid, qid, question, context, words, char_to_word, pairs,
                       is_impossible, f"{where} question {qid}")
        eid += 1


def _mrqa_examples(path: str) -> Iterator[QAExample]:
  """MRQA jsonl: a header line, then one paragraph with its questions per line."""
  eid = 0
  # The MRQA release ships gzipped files; either form is read.
  with (gzip.open if path.endswith(".gz") else open)(path, "rt", encoding="utf-8") as f:
    for line_number, line in enumerate(f, start=1):
      if not line.strip():
        continue
      try:
        paragraph = json.loads(line)
      except json.JSONDecodeError as e:
        raise DataError(f"{path}:{line_number}:{e.colno}: invalid JSON: {e.msg}") from None
      if not isinstance(paragraph, dict):
        raise DataError(f"{path}:{line_number}: expected a JSON object per line")
      if "header" in paragraph:
        continue
      where = f"{path}:{line_number}"
      context = _check_context(paragraph.get("context"), where)
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


def _question_lines(path: str) -> Iterator[QAExample]:
  """JSON lines of {"question", "context"[, "id"]}, one question each."""
  eid = 0
  with open(path, encoding="utf-8") as f:
    for line_number, line in enumerate(f, start=1):
      if not line.strip():
        continue
      where = f"{path}:{line_number}"
      try:
        record = json.loads(line)
      except json.JSONDecodeError as e:
        raise DataError(f"{where}:{e.colno}: invalid JSON: {e.msg}") from None
      if not isinstance(record, dict) or "question" not in record or \
          "context" not in record:
        raise DataError(f"{where}: expected a JSON object with \"question\" and "
                        "\"context\"")
      context = _check_context(record["context"], where)
      words, char_to_word = split_words(context)
      yield make_example(eid, record.get("id", str(eid)), record["question"], context,
                         words, char_to_word, [], False, where)
      eid += 1


def read_questions(path: str) -> Iterator[QAExample]:
  """Questions to answer, without gold answers: JSON lines of {"question", "context"
  [, "id"]} (read as they come), or a document in the SQuAD JSON layout."""
  try:
    with open(path, encoding="utf-8") as f:
      first = next((line for line in f if line.strip()), "")
  except UnicodeDecodeError as e:
    raise DataError(f"{path}: not UTF-8 text (byte {e.start})") from None
  try:
    record = json.loads(first)
    is_lines = isinstance(record, dict) and "question" in record
  except json.JSONDecodeError:
    is_lines = False  # a SQuAD document spread over several lines
  if is_lines:
    return _question_lines(path)
  return _squad_examples(QATask("questions", (), "squad", v2=True),
                         _load_squad_json(path), path, labelled=False)


def split_file(task: QATask, data_dir: str, split: str) -> str:
  if task.file_format == "squad":
    return layout.find_split_file(data_dir, task.name, split, task.folders,
                                  [split + ".json"], "official SQuAD JSON format")
  return layout.find_split_file(data_dir, task.name, split, task.folders,
                                [split + ".jsonl", split + ".jsonl.gz"], "MRQA jsonl format")


def read_file(task: QATask, path: str) -> List[QAExample]:
  """All questions of one SQuAD JSON or MRQA jsonl file."""
  if task.file_format == "squad":
    return _checked(_squad_examples(task, _load_squad_json(path), path), path)
  return _checked(_mrqa_examples(path), path)


def _checked(read: Iterator[QAExample], source: str) -> List[QAExample]:
  """All examples, with a warning counting answers not found at their offsets."""
  examples = list(read)
  if not examples:
    raise DataError(f"{source}: no questions")
  unmatched = sum(e.unmatched_answers for e in examples)
  if unmatched:
    first = next(e for e in examples if e.unmatched_answers)
    logging.warning("%s: %d gold answers do not match the context at their offset "
                    "(first in question %s); they are left out of training", source,
                    unmatched, first.qid)
  return examples


def read_tfds(task: QATask, split: str, tfds_data_dir: Optional[str] = None,
              builder=None) -> List[QAExample]:
  """Questions of a SQuAD dataset prepared in TensorFlow Datasets (or `builder`); never
  downloads."""
  if builder is None:
    builder = tfds_source.prepared_builder(task.tfds_name, tfds_data_dir)
  if builder is None:
    raise DataError(f"TensorFlow Datasets has no prepared {task.tfds_name}")
  tfds_split = {"train": "train", "dev": "validation"}.get(split, split)
  paragraphs = []

  def text(value: bytes) -> str:
    return value.decode("utf-8")

  for record in tfds_source.records(builder, tfds_split):
    answers = record["answers"]
    qa = {"id": text(record["id"]), "question": text(record["question"]),
          "is_impossible": bool(record.get("is_impossible", False)),
          "answers": [{"text": text(t), "answer_start": int(s)}
                      for t, s in zip(answers["text"], answers["answer_start"])]}
    context = text(record["context"])
    # TFDS stores one record per question; questions on one paragraph come together.
    if paragraphs and paragraphs[-1]["context"] == context:
      paragraphs[-1]["qas"].append(qa)
    else:
      paragraphs.append({"context": context, "qas": [qa]})
  source = f"TFDS {task.tfds_name} {tfds_split}"
  return _checked(_squad_examples(task, {"data": [{"paragraphs": paragraphs}]}, source),
                  source)


def read_examples(task: QATask, data_dir: str, split: str,
                  max_examples: Optional[int] = None, tfds_data_dir: Optional[str] = None,
                  fetch_missing: bool = False) -> List[QAExample]:
  """The first `max_examples` questions (all when None) of a split from the task's files
  or, when they are missing, from TFDS: prepared in `tfds_data_dir`, or (with
  `fetch_missing`) downloaded and prepared now."""
  try:
    path = split_file(task, data_dir, split)
  except DataError as missing:
    builder = tfds_source.instead_of_missing_files(missing, task.tfds_name,
                                                   tfds_data_dir, fetch_missing)
    if builder is None:
      raise
    return read_tfds(task, split, tfds_data_dir, builder)[:max_examples]
  return read_file(task, path)[:max_examples]
