"""A tagging task of one's own, end to end: a named-entity task file (CoNLL-2003-style
columns, IOB1, words in several scripts) fine-tuned by run_finetuning.py; its --predict
(entities as spans of each line, a long line tagged in windows as each window alone),
its serving SavedModel and ONNX files through the shipped reader; the task file's
readings and refusals; CoNLL-2003, CoNLL-2002 and XTREME's part of speech by name, from
their original files and from TFDS (faked)."""

import contextlib
import io
import json
import logging
import os
import re

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

import run_finetuning
from data_prep.tokenizer import Tokenizer
from data_prep.vocab import load_vocab
from finetune import config as finetune_config
from finetune import predict, tasks, tfds_source
from finetune.errors import DataError
from finetune.tagging import data as tagging_data
from finetune.tagging import metrics as tagging_metrics
from finetune.tagging.model import TaggingRunner
from tests.export_helpers import call_in_clean_process, run_readers
from tests.helpers import shared_folder, shared_path, write_tiny_pretrained_model
from tools import export_lite

ENTITIES = {
    "PER": ["John Smith", "Maria Garcia", "Hans Müller", "李 明", "Olga Ivanova"],
    "ORG": ["Reuters", "European Union", "Bank of England", "Toyota", "Bundesbank"],
    "LOC": ["Paris", "New York", "Москва", "東京", "Zürich", "São Paulo"],
    "MISC": ["German", "Olympic", "Nobel Prize"],
}
TEMPLATES = [
    "{PER} said on Monday that {ORG} would open an office in {LOC} .",
    "{ORG} shares rose 3 percent in {LOC} trading .",
    "{PER} , a {MISC} citizen , arrived in {LOC} on Friday .",
    "The {MISC} team beat the side from {LOC} 2-1 .",
    "{PER} told {ORG} that prices in {LOC} would fall .",
]
HPARAMS = {"max_seq_length": 32, "tagging_stride": 8, "train_batch_size": 8,
           "eval_batch_size": 16, "num_train_epochs": 4.0, "learning_rate": 4e-3}
# One-piece words: a line of them has as many pieces as words.
PLAIN = "the city said on monday that prices would fall in trading and".split()


def sentence(rng, templates=1):
  """(words, IOB1 tags) of `templates` templates filled with entities."""
  words, tags = [], []
  for template in rng.choice(TEMPLATES, templates):
    for token in template.split():
      kind = token[1:-1] if token.startswith("{") else None
      if kind is None:
        words.append(token)
        tags.append("O")
        continue
      entity = str(rng.choice(ENTITIES[kind])).split()
      words += entity
      tags += ["I-" + kind] * len(entity)  # IOB1, as CoNLL-2003 ships
  return words, tags


def conll(sentences):
  """CoNLL-2003 columns (word, POS, chunk, entity), a document start first."""
  blocks = ["-DOCSTART- -X- -X- O"] + [
      "\n".join(f"{w} NNP I-NP {t}" if t != "O" else f"{w} NN I-NP O"
                for w, t in zip(words, tags)) for words, tags in sentences]
  return "\n\n".join(blocks) + "\n"


def write_ner_task(folder):
  rng = np.random.default_rng(0)
  train = [sentence(rng) for _ in range(36)]
  dev = [sentence(rng) for _ in range(11)] + [sentence(rng, 4)]  # the last: windows
  (folder / "train.txt").write_text(conll(train), encoding="utf-8")
  (folder / "dev.txt").write_text(conll(dev), encoding="utf-8")
  (folder / "ner.json").write_text(json.dumps({
      "family": "tagging", "name": "ner", "tag_column": 3, "train": "train.txt",
      "dev": "dev.txt"}))
  return folder / "ner.json"


def flags(home, *extra):
  return ["--task", str(home / "ner.json"), "--model-name", "tiny", "--data-dir",
          str(home / "data"), "--hparams", json.dumps(HPARAMS), *extra]


def shared_ner_model(tmp_path_factory):
  """The folder of a tiny one-layer model fine-tuned on write_ner_task's task by
  run_finetuning.py's main (in this process: no process boundary is checked), with what
  it wrote to stdout (run.out) and to stderr and the log (run.err). Trained once per
  session."""
  def train(home):
    (home / "data").mkdir()
    write_tiny_pretrained_model(home / "data", layers=1)
    write_ner_task(home)
    out, err = io.StringIO(), io.StringIO()
    handler = logging.StreamHandler(err)  # a process's log goes to its stderr
    logging.getLogger().addHandler(handler)
    try:
      with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run_finetuning.main(flags(home))
    finally:
      logging.getLogger().removeHandler(handler)
    assert code == 0, err.getvalue()[-3000:]
    (home / "run.out").write_text(out.getvalue())
    (home / "run.err").write_text(err.getvalue())
  return shared_folder(tmp_path_factory, "ner_model", train)


def word_starts(line):
  """Each word's first character, found by walking the line (str.split's words)."""
  starts, at = [], 0
  for word in line.split():
    at = line.index(word, at)
    starts.append(at)
    at += len(word)
  return starts


@pytest.mark.slow
def test_a_named_entity_task_file_end_to_end(tmp_path, tmp_path_factory, capsys, caplog):
  home = shared_ner_model(tmp_path_factory)
  results = home / "data" / "models" / "tiny" / "results"
  # Results and curves named by the task; per-type figures beside them.
  out, err = (home / "run.out").read_text(), (home / "run.err").read_text()
  assert f"results: {results / 'ner_results.txt'}" in out
  assert f"dev curves: {results / 'ner_results.png'}" in out
  assert (results / "ner_results.png").is_file()
  summary = (results / "ner_results.txt").read_text()
  assert re.search(r"^ner dev f1: median [\d.]+ over 1 trial", summary, re.M), summary
  per_type = json.loads((results / "ner_tagging" / "ner_dev_eval.json").read_text())
  assert set(per_type["types"]) <= {"LOC", "MISC", "ORG", "PER"}
  assert sum(t["gold"] for t in per_type["types"].values()) > 0
  # The dev set's long sentence is read in windows, and said so.
  assert re.search(r"ner dev: 1 of 12 sentences are longer than one window of "
                   r"max_seq_length 32: read in \d+ windows, one every 8 pieces "
                   r"\(tagging_stride 8\)", err), err

  # --predict: lines as a user writes them, a 200-word line, and each of its windows
  # alone.
  lines = ["John  Smith said\tthat Reuters would open an office in Paris .",
           "Hans Müller arrived in 東京 on Friday .", "Bank of England shares rose ."]
  tokenizer = Tokenizer(load_vocab(str(home / "data" / "vocab.txt")))
  long_words = [PLAIN[i % len(PLAIN)] if i % 5 else "paris" for i in range(200)]
  assert all(tokenizer.tokenize(w) == [w] for w in long_words)
  room, stride = 30, 8
  starts = range(0, 200 - room + stride, stride)
  windows = [long_words[s:s + room] for s in starts]
  inputs = tmp_path / "lines.txt"
  inputs.write_text("\n".join(lines + [" ".join(long_words)] +
                              [" ".join(w) for w in windows]) + "\n", encoding="utf-8")
  output = tmp_path / "predicted.jsonl"
  assert run_finetuning.main(flags(home, "--predict", str(inputs), "--output",
                                  str(output))) == 0, capsys.readouterr().err
  assert re.search(r"predict: 1 of 27 sentences are longer than one window of "
                   r"max_seq_length 32: read in 23 windows, one every 8 pieces",
                   caplog.text)
  records = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
  assert [r["index"] for r in records] == list(range(len(records)))
  for record, line in zip(records[:3], lines):
    assert record["words"] == line.split()
    assert set(record["tags"]) <= {"O"} | {f"{p}-{t}" for p in "BI" for t in ENTITIES}
    starts_of = word_starts(line)
    assert record["entities"] == [
        {"type": kind, "text": line[starts_of[a]:starts_of[b] + len(record["words"][b])],
         "start": starts_of[a], "end": starts_of[b] + len(record["words"][b])}
        for kind, a, b in tagging_metrics.entity_spans(record["tags"])]
  assert sum(len(r["entities"]) for r in records) > 0  # it learned some entities
  # Each word of the long line is tagged as the window where it has the most context
  # (min(left, right) words, then the longer window; the first on ties) tags it alone.
  long, alone = records[3], records[4:]
  assert len(long["tags"]) == 200 and len(alone) == len(windows)
  for i, tag in enumerate(long["tags"]):
    holding = [k for k, s in enumerate(starts) if s <= i < s + len(windows[k])]
    best = max(holding, key=lambda k: (min(i - starts[k], starts[k] + len(windows[k]) - 1
                                           - i) + 0.01 * len(windows[k]), -k))
    assert tag == alone[best]["tags"][i - starts[best]], i

  # The serving SavedModel tags the same, long line included.
  trial = home / "data" / "models" / "tiny" / "finetuning_models" / "ner_model_1"
  texts = lines + [" ".join(long_words)]
  [saved] = call_in_clean_process({"path": str(trial / "saved_model"),
                                   "serving_default": {"text": texts}})
  tags = np.array(saved["serving_default"]["tag"]).reshape(len(texts), -1).tolist()
  assert [[t for t in row if t] for row in tags] == [r["tags"] for r in records[:4]]

  # ONNX through the shipped reader: --predict's records, and of words given as lists
  # their entities as word indices.
  export = tmp_path / "export"
  assert export_lite.main(["--model-dir", str(trial), "--output", str(export),
                           "--format", "onnx"]) == 0
  [got] = run_readers(export, ["model_float32.onnx"],
                      [texts + [t.split() for t in texts]]).values()
  assert got["records"][:4] == records[:4]
  for record, want in zip(got["records"][4:], records):
    assert (record["words"], record["tags"]) == (want["words"], want["tags"])
    assert record["entities"] == [
        {"type": e["type"], "text": " ".join(want["words"][a:b + 1]), "start_word": a,
         "end_word": b + 1} for e, (_, a, b) in zip(
             want["entities"], tagging_metrics.entity_spans(want["tags"]))]


def write(path, text):
  path.write_text(text, encoding="utf-8")
  return str(path)


def test_task_file_reads_schemes_formats_and_tags(tmp_path):
  # IOB1 read from the tags (more entities open with I- than with B-); tags sorted.
  write(tmp_path / "a.txt", "Hans I-PER\nMüller I-PER\nsaw O\nAnna I-PER\nB B-PER\n\n"
                            "東京 I-LOC\n")
  spec = {"family": "tagging", "name": "한국어", "train": "a.txt"}
  task = tasks.get_task(write(tmp_path / "t.json", json.dumps(spec)))
  assert (task.scheme, task.metrics) == ("iob1", ("f1",))
  assert task.tags == ("B-PER", "I-LOC", "I-PER", "O")
  assert task.labels == ("O", "B-PER", "I-PER", "E-PER", "S-PER", "B-LOC", "I-LOC",
                         "E-LOC", "S-LOC")
  assert task.eval_splits == () and task.name == "한국어"
  examples = tasks.read_examples(task, "unused", "train")
  assert [e.words for e in examples] == [("Hans", "Müller", "saw", "Anna", "B"), ("東京",)]
  # IOB2 and BIOES, JSON lines, and parts of speech (accuracy) read alike.
  write(tmp_path / "b.jsonl", json.dumps({"words": ["a", "b"], "tags": ["B-X", "E-X"]})
        + "\n\n" + json.dumps({"words": ["c"], "tags": ["S-Y"]}) + "\n")
  task = tasks.get_task(write(tmp_path / "t.json", json.dumps(
      {**spec, "format": "jsonl", "train": "b.jsonl"})))
  assert task.scheme == "bioes" and task.output_tags == task.labels
  assert [e.tags for e in tasks.read_examples(task, "", "train")] == [("B-X", "E-X"),
                                                                      ("S-Y",)]
  write(tmp_path / "c.txt", "1\tThe\tthe\tDET\n\n2\tdog\tdog\tNOUN\n")
  task = tasks.get_task(write(tmp_path / "t.json", json.dumps(
      {**spec, "word_column": 1, "tag_column": 3, "train": "c.txt"})))
  assert (task.scheme, task.metrics, task.labels) == ("none", ("accuracy",),
                                                      ("DET", "NOUN"))
  assert task.output_tags == task.labels
  # Given tags and scheme: the file is not read for them.
  task = tasks.get_task(write(tmp_path / "t.json", json.dumps(
      {**spec, "train": "missing.txt", "scheme": "bio", "tags": ["O", "B-A", "I-A"]})))
  assert (task.scheme, task.types) == ("iob2", ("A",))
  # Sentence tasks keep their files as ever, "family" or not.
  write(tmp_path / "s.csv", "text,label\nfine,1\n")
  sentence = {"name": "s", "format": "csv", "text_a": "text", "label": "label",
              "labels": ["0", "1"], "train": "s.csv"}
  for given in ({}, {"family": "sentence"}):
    assert tasks.get_task(write(tmp_path / "s.json", json.dumps(
        {**sentence, **given}))).labels == ("0", "1")


@pytest.mark.parametrize("spec,files,expected", [
    ({"family": "tag"}, {}, r't.json: "family": unknown task family '
     r"'tag'; did you mean 'tagging'\? \(expected one of qa, sentence, tagging\)$"),
    ({"scheme": "bilou"}, {}, r"t.json: unknown \"scheme\" 'bilou'"),
    ({"colour": 1}, {}, "t.json: unknown task file key 'colour'"),
    ({"tags": ["O", "O"]}, {}, "t.json: \"tags\" names 'O' twice"),
    ({"tags": ["O", "NOUN"], "scheme": "none", "metric": "f1"}, {},
     'metric "f1" counts entities, and these tags have none'),
    ({"tags": ["O", "E-A"], "scheme": "iob2"}, {},
     r"t.json: \"tags\": tag 'E-A' is outside the IOB2 scheme \(O, B-TYPE, I-TYPE\)$"),
    # Bad lines, named by file and line.
    ({}, {"train.txt": "He O\nran\n"}, r"train.txt:2: expected a word in column 0 and "
     r"a tag in column -1 \(0-based, -1 the last\), found 1 column$"),
    ({"scheme": "iob2"}, {"train.txt": "He B-PER\n\nJo S-PER\n"},
     r"train.txt:3: tag 'S-PER' is outside the IOB2 scheme \(O, B-TYPE, I-TYPE\)$"),
    ({}, {"train.txt": "He B-PER\nran VERB\n"}, r"train.txt:2: tag 'VERB' has no "
     r"B-/I-/E-/S- prefix but 'B-PER' has; give \"scheme\""),
    ({"format": "jsonl", "train": "t.jsonl"}, {"t.jsonl": '{"words": [], "tags": []}\n'},
     r"t.jsonl:1: an empty sentence \(no words\)$"),
    ({"format": "jsonl", "train": "t.jsonl"},
     {"t.jsonl": '\n{"words": ["a"], "labels": ["O"]}\n'},
     r't.jsonl:2: expected a JSON object with "words" and "tags", lists of strings$'),
    ({"format": "jsonl", "train": "t.jsonl"},
     {"t.jsonl": '{"words": ["a", "b"], "tags": ["O"]}\n'}, r"t.jsonl:1: 2 words but 1 "
     r"tags$"),
])
def test_task_file_refusals_name_the_file_line_and_field(tmp_path, spec, files, expected):
  for name, text in {"train.txt": "He B-PER\n", **files}.items():
    write(tmp_path / name, text)
  path = write(tmp_path / "t.json", json.dumps({"family": "tagging", "name": "t",
                                                "train": "train.txt", **spec}))
  with pytest.raises(DataError, match=expected):
    tasks.get_task(path)


def test_conll2000_through_a_task_file_reads_and_scores_as_chunk(tmp_path, caplog):
  """The same file read as a user's task (its tags, scheme and label order its own) and
  as `chunk`: the same sentences, and the same span F1 of the same predictions."""
  os.symlink(shared_path("conll2000", "test.txt"), tmp_path / "test.txt")
  chunk, task = tasks.get_task("chunk"), tasks.get_task(write(
      tmp_path / "c.json", json.dumps({"family": "tagging", "name": "c", "tag_column": 2,
                                       "train": "test.txt"})))
  assert task.scheme == "iob2" and set(task.tags) <= set(chunk.tags)
  mine = tasks.read_examples(task, "", "train")[:300]
  theirs = tagging_data.read_file(chunk, shared_path("conll2000", "test.txt"))[:300]
  assert [(e.words, e.tags) for e in mine] == [(e.words, e.tags) for e in theirs]
  tokenizer = Tokenizer(load_vocab(shared_path("vocab", "bert_uncased_vocab.txt")))
  runners = [TaggingRunner(t, finetune_config.load_config(
      "electra_small", [name], "unused", {"max_seq_length": 24, "tagging_stride": 8,
                                          "results_dir": str(tmp_path)}), tokenizer)
             for t, name in ((chunk, "chunk"), (task, str(tmp_path / "c.json")))]
  features = [r.features(mine, "test") for r in runners]
  # Gold labels, a fifth of them changed to another label of the task's (its types:
  # those of this file); the same predictions in each runner's label order.
  order = [runners[0].labels.index(label) for label in runners[1].labels]
  rng = np.random.default_rng(0)
  labels = features[0]["word_labels"]
  chosen = np.where(rng.random(labels.shape) < 0.2,
                    np.array(order)[rng.integers(0, len(order), labels.shape)], labels)
  logits = np.eye(len(runners[0].labels))[chosen]
  scores = [r.score(mine, f, out, "test")
            for r, f, out in zip(runners, features, (logits, logits[..., order]))]
  assert scores[0] == scores[1] and 0 < scores[0]["f1"] < 100
  # Predicted entities that open with I- count, and a run says so once.
  runners[0].score(mine, features[0], logits, "test")
  said = [r.getMessage() for r in caplog.records if "open with I- or E-" in r.getMessage()]
  opened = sum(tags[a][0] == "I" for tags in (
      tagging_data.to_bio(sentence) for sentence in tagging_data.predicted_tags(
          mine, features[0], logits, runners[0].labels))
               for _, a, _ in tagging_metrics.entity_spans(tags))
  assert said[0] == (f"chunk test: {opened} predicted and 0 gold entities open with I- "
                     "or E- (no entity of their type open before them): each counts as "
                     "an entity from that word, as conlleval counts it")
  assert opened > 0 and len(said) == 2  # once for each runner


def test_a_bad_dev_file_is_one_line_before_training(tmp_path, capsys):
  (tmp_path / "data").mkdir()
  write_tiny_pretrained_model(tmp_path / "data", layers=1)
  write(tmp_path / "train.txt", "Anna B-PER\nsang O\n")
  write(tmp_path / "dev.txt", "Bob B-PER\n\nMax B-ORG\n")
  path = write(tmp_path / "ner.json", json.dumps({
      "family": "tagging", "name": "ner", "train": "train.txt", "dev": "dev.txt"}))
  code = run_finetuning.main(["--task", path, "--model-name", "tiny", "--data-dir",
                              str(tmp_path / "data")])
  err = capsys.readouterr().err
  assert code == 2 and err == (
      f"error: {tmp_path / 'dev.txt'}:3: unknown tag 'B-ORG' of task ner; expected O or "
      "B-/I- with one of PER\n")


def test_named_tasks_from_original_files(tmp_path):
  data = tmp_path / "data"
  folder = data / "finetuning_data"
  # CoNLL-2003 as shipped: eng.train, its entities in IOB1 in the fourth column.
  for name in ("conll2003", "conll2002_es", "xtreme_pos_en"):
    (folder / name).mkdir(parents=True)
  write(folder / "conll2003" / "eng.train", "-DOCSTART- -X- -X- O\n\nEU NNP I-NP I-ORG\n"
        "rejects VBZ I-VP O\nGerman JJ I-NP I-MISC\n\nPeter NNP I-NP I-PER\n")
  write(folder / "conll2002_es" / "esp.testa", "Sao B-LOC\nPaulo I-LOC\n( O\n")
  write(folder / "xtreme_pos_en" / "dev.conllu", "# sent_id = 1\n# text = I'm here\n"
        "1-2\tI'm\t_\t_\t_\n1\tI\tI\tPRON\tPRP\n2\t'm\tbe\tAUX\tVBP\n3\there\there\tADV\t"
        "RB\n\n")
  read = lambda name, split: [(e.words, e.tags) for e in tasks.read_examples(
      tasks.get_task(name), str(data), split)]
  assert read("conll2003", "train") == [(("EU", "rejects", "German"),
                                         ("I-ORG", "O", "I-MISC")), (("Peter",), ("I-PER",))]
  assert read("conll2002/es", "dev") == [(("Sao", "Paulo", "("), ("B-LOC", "I-LOC", "O"))]
  assert read("xtreme_pos/en", "dev") == [(("I", "'m", "here"), ("PRON", "AUX", "ADV"))]
  assert tasks.get_task("xtreme_pos/en").metrics == ("accuracy",)


SENTENCES = {"train": [(["EU", "rejects", "German", "call"], [3, 0, 7, 0])],
             "dev": [(["Peter", "Blackburn"], [1, 2]), (["東京"], [5])]}


def test_named_tasks_by_name_through_tfds(tmp_path, monkeypatch):
  """conll2003 and xtreme_pos missing from the data dir: TFDS prepares and reads them
  (its builder faked: these records, class ids as TFDS stores them)."""
  def as_dataset(builder, split, *args, **kwargs):
    del args, kwargs
    tags = "ner" if "conll" in builder.name else "upos"
    return tf.data.Dataset.from_generator(
        lambda: ({"tokens": words, tags: ids} for words, ids in SENTENCES[split]),
        output_signature={"tokens": tf.TensorSpec([None], tf.string),
                          tags: tf.TensorSpec([None], tf.int64)})
  fetched = []
  monkeypatch.setattr(tfds_source, "unreachable_hosts",
                      lambda builder: fetched.append(builder.name) or [])
  with tfds.testing.mock_data(as_dataset_fn=as_dataset):
    read = lambda name, split: [(e.words, e.tags) for e in tasks.read_examples(
        tasks.get_task(name), str(tmp_path), split, tfds_data_dir=str(tmp_path / "tfds"),
        fetch_missing=True)]
    # TFDS's class names: O, B-PER, I-PER, B-ORG, I-ORG, B-LOC, I-LOC, B-MISC, I-MISC.
    assert read("conll2003", "train") == [(("EU", "rejects", "German", "call"),
                                           ("B-ORG", "O", "B-MISC", "O"))]
    assert read("conll2002/nl", "dev") == [(("Peter", "Blackburn"), ("B-PER", "I-PER")),
                                           (("東京",), ("B-LOC",))]
    # UPOS: ADJ ADP ADV AUX CCONJ DET ...
    assert read("xtreme_pos/xtreme_pos_de", "dev") == [(("Peter", "Blackburn"),
                                                        ("ADP", "ADV")), (("東京",), ("DET",))]
  assert fetched == ["conll2003", "conll2002", "xtreme_pos"]
  with tfds.testing.mock_data(as_dataset_fn=as_dataset), pytest.raises(
      DataError, match=r"missing train file of conll2003; expected .*conll2003/train.txt "
      r"or .*conll2003/eng.train"):
    tasks.read_examples(tasks.get_task("conll2003"), str(tmp_path), "train")


@pytest.mark.slow
def test_predict_words_as_json_lines(tmp_path, tmp_path_factory):
  """--predict of {"words": [...]} lines: entities as word indices."""
  home = shared_ner_model(tmp_path_factory)
  config = finetune_config.load_config("tiny", [str(home / "ner.json")],
                                       str(home / "data"), HPARAMS)
  words = [["John", "Smith", "said", "that", "Reuters", "would", "open"], ["東京"]]
  path = tmp_path / "words.jsonl"
  path.write_text("".join(json.dumps({"words": w}) + "\n" for w in words))
  out = tmp_path / "out.jsonl"
  with open(out, "w", encoding="utf-8") as f:
    assert predict.predict_file(config, str(path), f, log=lambda _: None) == 2
  for record, given in zip(map(json.loads, out.read_text().splitlines()), words):
    assert record["words"] == given
    assert record["entities"] == [
        {"type": kind, "text": " ".join(given[a:b + 1]), "start_word": a, "end_word": b + 1}
        for kind, a, b in tagging_metrics.entity_spans(record["tags"])]
