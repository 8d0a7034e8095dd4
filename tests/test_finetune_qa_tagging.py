"""SQuAD/MRQA readers and the CoNLL-2000 chunking reader, on shared and written files."""

import gzip
import json
import logging
import os
import re

import pytest
import seqeval.metrics

from finetune import tasks
from finetune.tagging import metrics as tagging_metrics
from finetune.qa import data as qa_data
from finetune.tagging import data as tagging_data
from finetune.errors import DataError
from data_prep.reference_tokenizer import CJK_RANGES
from tests.helpers import shared_path

# A context's words: each CJK character alone, else a run of characters no separator
# (space, tab, line break, U+202F) or CJK character is part of.
_CJK = "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in CJK_RANGES)
WORD = re.compile(f"[{_CJK}]|[^ \t\r\n\u202f{_CJK}]+")


@pytest.fixture(scope="module")
def squad_dev():
  path = shared_path("squad", "dev-v1.1.json")
  with open(path, encoding="utf-8") as f:
    return path, json.load(f)


def test_squad_v1_reader_locates_every_shared_answer(squad_dev):
  path, document = squad_dev
  examples = qa_data.read_file(tasks.get_task("squad/v1.1"), path)
  questions = [(paragraph["context"], question) for article in document["data"]
               for paragraph in article["paragraphs"] for question in paragraph["qas"]]
  assert len(examples) == len(questions) == 10570
  for example, (context, question) in zip(examples, questions):
    assert (example.qid, example.question, example.context) == (
        question["id"], question["question"], context)
    assert example.gold_texts == tuple(a["text"] for a in question["answers"])
    assert len(example.answers) == len(question["answers"]) and not example.is_impossible
    spans = [m.span() for m in WORD.finditer(context)]
    assert example.doc_tokens == tuple(context[a:b] for a, b in spans)
    for answer in example.answers:
      assert context[answer.start:answer.start + len(answer.text)] == answer.text
      # Its first and last characters are in the words it maps to.
      last = answer.start + len(answer.text) - 1
      assert spans[answer.start_word][0] <= answer.start < spans[answer.start_word][1]
      assert spans[answer.end_word][0] <= last < spans[answer.end_word][1]
  # SQuAD's English contexts hold some Chinese (names in their own script).
  assert sum(any(len(w) == 1 and WORD.match(w) and w >= "\u3400" for w in e.doc_tokens)
             for e in examples) > 10


def test_split_words_maps_characters_to_words():
  words, char_to_word = qa_data.split_words(" ab  c\u202fd ")
  assert words == ("ab", "c", "d")
  assert char_to_word == (-1, 0, 0, 0, 0, 1, 1, 2, 2)
  # Each CJK character is a word (as BERT's tokenizer makes it a token); Hangul is not
  # CJK there.
  words, char_to_word = qa_data.split_words("北京市(Beijing)是首都。 한국어 x北y")
  assert words == ("北", "京", "市", "(Beijing)", "是", "首", "都", "。", "한국어", "x", "北",
                   "y")
  assert char_to_word == (0, 1, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 4, 5, 6, 7, 7, 8, 8, 8, 8, 9,
                          10, 11)


def _write_json(path, value):
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(json.dumps(value), encoding="utf-8")
  return path


def _v2_document():
  context = "The Normans gave their name to Normandy, a region in France."
  return {"version": "v2.0", "data": [{"title": "Normans", "paragraphs": [{
      "context": context,
      "qas": [
          {"id": "q1", "question": "Who gave their name to Normandy?",
           "answers": [{"text": "The Normans", "answer_start": 0},
                       {"text": "Normans", "answer_start": 4}], "is_impossible": False},
          {"id": "q2", "question": "Who gave Normandy to France?", "answers": [],
           "plausible_answers": [{"text": "Normans", "answer_start": 4}],
           "is_impossible": True},
          {"id": "q3", "question": "Where is Normandy?",
           "answers": [{"text": "France", "answer_start": context.index("France")},
                       {"text": "Spain", "answer_start": context.index("France")}],
           "is_impossible": False},
      ]}]}]}


def test_squad_v2_reader_with_unanswerable_and_mismatched_answers(tmp_path):
  path = _write_json(tmp_path / "finetuning_data" / "squad" / "train.json", _v2_document())
  task = tasks.get_task("squad")
  assert task.name == "squad/v2.0" and task.v2
  examples = tasks.read_examples(task, str(tmp_path), "train")
  assert [e.qid for e in examples] == ["q1", "q2", "q3"]
  q1, q2, q3 = examples
  assert [(a.text, a.start_word, a.end_word) for a in q1.answers] == [
      ("The Normans", 0, 1), ("Normans", 1, 1)]
  assert q2.is_impossible and q2.answers == () and q2.gold_texts == ()
  # "Spain" is not at its offset: kept with where it was (the runner reports it), the
  # question is kept.
  assert [a.text for a in q3.answers] == ["France"]
  assert q3.unmatched == (f"{path}: article 0 paragraph 0 question q3: answer 'Spain' "
                          "at 53, where the context reads 'Franc'",)
  assert q3.doc_tokens[q3.answers[0].start_word] == "France."


@pytest.mark.parametrize("change,expected", [
    (lambda d: d["data"][0]["paragraphs"][0].update(context="  "),
     "article 0 paragraph 0: empty context"),
    (lambda d: d["data"][0]["paragraphs"][0]["qas"][0].update(question=""),
     "article 0 paragraph 0 question q1: empty question"),
    (lambda d: d["data"][0]["paragraphs"][0]["qas"][0]["answers"][0].update(
        answer_start=70), "answer 'The Normans' at offset 70 runs outside the context"),
    (lambda d: d["data"][0]["paragraphs"][0]["qas"][0].pop("id"),
     'article 0 paragraph 0 question 0: no "id" \\(each question needs one of its own\\)$'),
    (lambda d: d["data"][0]["paragraphs"][0]["qas"][1].pop("question"),
     'article 0 paragraph 0 question q2: no "question" text$'),
    (lambda d: d["data"][0]["paragraphs"][0].pop("context"),
     'article 0 paragraph 0: no "context" text$'),
    (lambda d: d["data"][0]["paragraphs"][0]["qas"][2].pop("answers"),
     'question q3: no "answers" \\(an empty list for a question without an answer\\)$'),
    (lambda d: d["data"][0]["paragraphs"][0]["qas"][2].update(answers="France"),
     'question q3: "answers" must be a list of {"text", "answer_start"} or'),
    (lambda d: d.pop("data"), 'expected a SQuAD JSON object with a "data" list'),
])
def test_squad_reader_errors(tmp_path, change, expected):
  document = _v2_document()
  change(document)
  path = _write_json(tmp_path / "train.json", document)
  with pytest.raises(DataError, match=expected):
    qa_data.read_file(tasks.get_task("squad/v2.0"), str(path))


def test_malformed_json_and_v1_without_answers(tmp_path):
  path = tmp_path / "dev.json"
  path.write_text('{"data": [\n  {"paragraphs": [}\n]}')
  with pytest.raises(DataError, match=f"{path}:2:19: invalid JSON"):
    qa_data.read_file(tasks.get_task("squadv1"), str(path))
  _write_json(path, _v2_document())
  with pytest.raises(DataError, match=r"question q2: no answers \(squad/v1.1 has no "
                     r"unanswerable questions; SQuAD 2.0 data needs squad/v2.0\)$"):
    qa_data.read_file(tasks.get_task("squad/v1.1"), str(path))
  with pytest.raises(DataError, match=r"finetuning_data/squadv1/train.json: missing train"):
    tasks.read_examples(tasks.get_task("squadv1"), str(tmp_path), "train")


def test_mrqa_jsonl_reader(tmp_path):
  context = "[PAR] [TLE] Moon [SEP] The Moon orbits Earth every 27 days."
  lines = [{"header": {"dataset": "NewsQA", "split": "train"}},
           {"context": context, "qas": [
               {"qid": "m1", "question": "What does the Moon orbit?", "answers": ["Earth"],
                "detected_answers": [{"text": "Earth", "char_spans": [[39, 43]],
                                      "token_spans": [[7, 7]]}]},
               {"qid": "m2", "question": "How often?", "answers": ["27 days", "every 27"],
                "detected_answers": [{"text": "27 days", "char_spans": [[51, 57]]}]}]}]
  path = tmp_path / "finetuning_data" / "newsqa" / "train.jsonl"
  path.parent.mkdir(parents=True)
  path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
  examples = tasks.read_examples(tasks.get_task("newsqa"), str(tmp_path), "train")
  assert [(e.qid, e.answers[0].text, e.doc_tokens[e.answers[0].start_word])
          for e in examples] == [("m1", "Earth", "Earth"), ("m2", "27 days", "27")]
  assert examples[1].gold_texts == ("27 days", "every 27")
  gzipped = tmp_path / "gz" / "finetuning_data" / "newsqa" / "train.jsonl.gz"
  gzipped.parent.mkdir(parents=True)
  with gzip.open(gzipped, "wt", encoding="utf-8") as f:
    f.write(path.read_text())
  assert tasks.read_examples(tasks.get_task("newsqa"), str(tmp_path / "gz"),
                             "train") == examples
  with open(path, "a") as f:
    f.write('{"context": "x", "qas": [\n')
  with pytest.raises(DataError, match=rf"{path}:3:\d+: invalid JSON"):
    tasks.read_examples(tasks.get_task("mrqa/news_qa"), str(tmp_path), "train")


@pytest.fixture(scope="module")
def conll_dir(tmp_path_factory):
  data_dir = tmp_path_factory.mktemp("data")
  (data_dir / "finetuning_data").mkdir()
  os.symlink(os.path.dirname(shared_path("conll2000", "train.txt")),
             data_dir / "finetuning_data" / "conll2000")
  return str(data_dir)


def test_conll2000_reader_on_shared_data(conll_dir):
  task = tasks.get_task("chunk")
  for split, count in (("train", 8936), ("test", 2012)):
    examples = tasks.read_examples(task, conll_dir, split)
    with open(shared_path("conll2000", split + ".txt"), encoding="utf-8") as f:
      lines = [line.split() for line in f]
    assert len(examples) == count
    assert sum(len(e.words) for e in examples) == sum(1 for fields in lines if fields)
    assert [t for e in examples for t in e.tags] == [l[2] for l in lines if l]
    assert examples[0].words[0] == lines[0][0]
  # Chunk F1 of a perturbed tagging agrees with seqeval (conlleval's definition).
  gold = [list(e.tags) for e in examples[:500]]
  predicted = [[("B-" + t[2:] if t.startswith("I-") and i % 7 == 0 else t)
                for i, t in enumerate(s)] for s in gold]
  assert tagging_metrics.entity_scores(gold, predicted)["f1"] == pytest.approx(
      seqeval.metrics.f1_score(gold, predicted))
  assert tagging_metrics.entity_scores(gold, gold)["f1"] == 1.0


def test_conll_reader_errors(tmp_path):
  chunk = tasks.get_task("chunk")
  path = tmp_path / "train.txt"
  path.write_text("He PRP B-NP\nran VBD B-XP\n")
  with pytest.raises(DataError, match=f"{path}:2: unknown tag 'B-XP' of task chunk; "
                     "expected O or B-/I- with one of ADJP, ADVP"):
    tagging_data.read_file(chunk, str(path))
  path.write_text("He PRP B-NP\n\nran B-VP\n")
  with pytest.raises(DataError, match=f"{path}:3: expected a word in column 0 and a tag "
                     r"in column 2 \(0-based, -1 the last\), found 2 columns$"):
    tagging_data.read_file(chunk, str(path))
  # A file without its blank lines is not one sentence of thousands of words.
  words = "".join(f"w{i} NN B-NP\n" for i in range(tagging_data.MAX_SENTENCE_WORDS))
  path.write_text("He PRP B-NP\n\n" + words)
  assert len(tagging_data.read_file(chunk, str(path))[1].words) == 1000
  path.write_text("He PRP B-NP\n\n" + words + "ran VBD B-VP\n")
  with pytest.raises(DataError) as info:
    tagging_data.read_file(chunk, str(path))
  assert str(info.value) == (f"{path}:3: a sentence of more than 1,000 words starts "
                             "here; sentences are separated by blank lines")
  path.write_text("\n\n")
  with pytest.raises(DataError, match="no sentences"):
    tagging_data.read_file(chunk, str(path))
  with pytest.raises(DataError, match="missing test file of chunk"):
    tasks.read_examples(chunk, str(tmp_path), "test")
  with pytest.raises(DataError, match=r"task chunk has no split 'dev' \(it has train, "
                     r"test\)"):
    tasks.read_examples(chunk, str(tmp_path), "dev")


def test_bioes_round_trip():
  tags = ["B-NP", "I-NP", "I-NP", "B-VP", "O", "I-PP", "B-NP"]
  labels = tagging_data.to_bioes(tags)
  assert labels == ["B-NP", "I-NP", "E-NP", "S-VP", "O", "S-PP", "S-NP"]
  assert set(labels) <= set(tasks.get_task("chunk").labels)
  assert tagging_metrics.entity_spans(tagging_data.to_bio(labels)) == \
      tagging_metrics.entity_spans(labels) == tagging_metrics.entity_spans(tags)
  # IOB1 (entities open with I-, B- only between two of a type) reads alike.
  assert tagging_data.to_bioes(["I-PER", "I-PER", "B-PER", "O", "I-LOC"]) == [
      "B-PER", "E-PER", "S-PER", "O", "S-LOC"]


def test_squad_v2_from_prepared_tfds(tmp_path):
  """TFDS records (one per question) become the same examples as the JSON file gives."""
  # Imported here: the other tests of this file run without TensorFlow.
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  document = _v2_document()
  paragraph = document["data"][0]["paragraphs"][0]

  def records():
    for question in paragraph["qas"]:
      answers = question["answers"]
      yield {"id": question["id"], "title": "Normans", "context": paragraph["context"],
             "question": question["question"], "is_impossible": question["is_impossible"],
             "answers": {"text": [a["text"] for a in answers],
                         "answer_start": [a["answer_start"] for a in answers]}}

  def as_dataset(self, split, **unused_kwargs):
    del self, unused_kwargs
    assert split == "validation"
    text = tf.TensorSpec([], tf.string)
    return tf.data.Dataset.from_generator(records, output_signature={
        "id": text, "title": text, "context": text, "question": text,
        "is_impossible": tf.TensorSpec([], tf.bool),
        "answers": {"text": tf.TensorSpec([None], tf.string),
                    "answer_start": tf.TensorSpec([None], tf.int32)}})

  task = tasks.get_task("squad/v2.0")
  builder = tfds.builder(task.tfds_name, data_dir=str(tmp_path))
  os.makedirs(builder.data_path)
  builder.info.write_to_directory(builder.data_path)  # marks it prepared
  with tfds.testing.mock_data(data_dir=str(tmp_path), as_dataset_fn=as_dataset):
    from_tfds = tasks.read_examples(task, str(tmp_path / "no_files"), "dev",
                                    tfds_data_dir=str(tmp_path))
  from_json = qa_data.read_file(task, str(_write_json(tmp_path / "dev.json", document)))
  assert from_tfds == from_json and len(from_tfds) == 3
