"""GLUE and users' classification/regression readers, and the task registry.

The shared GLUE files (CoLA, SST-2, MRPC, STS-B, RTE) are checked against an independent
read with the csv module; the tasks without shared data (QQP, MNLI, QNLI, WNLI, AX) are
read from small files written here in GLUE's layout.
"""

import csv
import logging
import os

import pytest

from finetune import tasks
from finetune.sentence.model import write_glue_submission
from finetune.sentence.data import SentenceExample, both_orders
from finetune.errors import DataError
from tests.helpers import ROOT, shared_path

# (task, GLUE folder, label set, {split: (header?, text_a col, text_b col, label col)}).
SHARED_GLUE = [
    ("cola", "CoLA", {"0", "1"},
     {"train": (False, 3, None, 1), "dev": (False, 3, None, 1), "test": (True, 1, None, None)}),
    ("sst", "SST-2", {"0", "1"},
     {"train": (True, 0, None, 1), "dev": (True, 0, None, 1), "test": (True, 1, None, None)}),
    ("mrpc", "MRPC", {"0", "1"},
     {"train": (True, 3, 4, 0), "dev": (True, 3, 4, 0), "test": (True, 3, 4, None)}),
    ("sts", "STS-B", None,
     {"train": (True, 7, 8, 9), "dev": (True, 7, 8, 9), "test": (True, 7, 8, None)}),
    ("rte", "RTE", {"entailment", "not_entailment"},
     {"train": (True, 1, 2, 3), "dev": (True, 1, 2, 3), "test": (True, 1, 2, None)}),
]


def _independent_rows(path, header):
  with open(path, encoding="utf-8-sig", newline="") as f:
    rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
  return rows[1:] if header else rows


@pytest.fixture(scope="module")
def shared_data_dir(tmp_path_factory):
  """A data_dir whose finetuning_data/ is the shared GLUE folder (GLUE's folder names)."""
  data_dir = tmp_path_factory.mktemp("data")
  os.symlink(shared_path("glue"), data_dir / "finetuning_data")
  return str(data_dir)


@pytest.mark.parametrize("name,folder,label_set,layouts", SHARED_GLUE,
                         ids=[case[0] for case in SHARED_GLUE])
def test_reader_matches_independent_read_of_shared_glue(shared_data_dir, name, folder,
                                                        label_set, layouts):
  task = tasks.get_task(name)
  for split, (header, a, b, label) in layouts.items():
    examples = tasks.read_examples(task, shared_data_dir, split)
    rows = _independent_rows(shared_path("glue", folder, split + ".tsv"), header)
    assert len(examples) == len(rows) > 0
    assert [e.text_a for e in examples] == [r[a] for r in rows]
    assert [e.text_b for e in examples] == [r[b] if b is not None else None for r in rows]
    assert [e.eid for e in examples] == list(range(len(rows)))
    if label is None:
      assert all(e.label is None for e in examples)
    elif label_set is None:
      assert [e.label for e in examples] == [float(r[label]) for r in rows]
    else:
      assert {e.label for e in examples} == label_set
      assert [e.label for e in examples] == [r[label] for r in rows]


def test_mrpc_byte_order_mark_is_not_part_of_the_header(shared_data_dir):
  with open(shared_path("glue", "MRPC", "train.tsv"), "rb") as f:
    assert f.read(3) == b"\xef\xbb\xbf"  # the file really has one
  task = tasks.get_task("glue/mrpc")
  first = tasks.read_examples(task, shared_data_dir, "train")
  assert first[0].label in ("0", "1")


def _write(path, lines):
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text("".join("\t".join(fields) + "\n" for fields in lines), encoding="utf-8")
  return path


MNLI_TRAIN_HEADER = ["index", "promptID", "pairID", "genre", "sentence1_binary_parse",
                     "sentence2_binary_parse", "sentence1_parse", "sentence2_parse",
                     "sentence1", "sentence2", "label1", "gold_label"]
MNLI_DEV_HEADER = MNLI_TRAIN_HEADER[:-1] + ["label2", "label3", "label4", "label5",
                                            "gold_label"]


def _mnli_row(i, premise, hypothesis, labels=()):
  return [str(i), "p", "q", "fiction", "(x)", "(y)", "(X)", "(Y)", premise, hypothesis,
          *labels]


def test_mnli_matched_and_mismatched_splits(tmp_path):
  folder = tmp_path / "finetuning_data" / "MNLI"
  _write(folder / "train.tsv", [MNLI_TRAIN_HEADER,
                                _mnli_row(0, "A man eats.", "Someone eats.",
                                          ["entailment", "entailment"]),
                                _mnli_row(1, "It rains.", "It is dry.",
                                          ["contradiction", "contradiction"])])
  for name, hypothesis, gold in (("dev_matched", "h1", "neutral"),
                                 ("dev_mismatched", "h2", "contradiction")):
    _write(folder / f"{name}.tsv", [MNLI_DEV_HEADER,
                                    _mnli_row(0, "p", hypothesis, ["neutral"] * 5 + [gold])])
  for name in ("test_matched", "test_mismatched"):
    _write(folder / f"{name}.tsv", [MNLI_TRAIN_HEADER[:10], _mnli_row(0, "p", name)])
  task = tasks.get_task("mnli")
  assert task.eval_splits == ("dev_matched", "dev_mismatched")
  read = {split: tasks.read_examples(task, str(tmp_path), split)
          for split in task.splits}
  assert [(e.text_a, e.text_b, e.label) for e in read["train"]] == [
      ("A man eats.", "Someone eats.", "entailment"),
      ("It rains.", "It is dry.", "contradiction")]
  assert read["dev_matched"][0].label == "neutral"
  assert read["dev_mismatched"][0] == SentenceExample(0, "p", "h2",
                                                                     "contradiction")
  assert read["test_mismatched"][0].text_b == "test_mismatched"
  assert read["test_matched"][0].label is None


@pytest.mark.parametrize("name,folder,labels", [("qnli", "QNLI", ["entailment",
                                                                 "not_entailment"]),
                                                ("wnli", "wnli", ["0", "1"])])
def test_index_pair_tasks(tmp_path, name, folder, labels):
  base = tmp_path / "finetuning_data" / folder
  header = ["index", "sentence1", "sentence2", "label"]
  _write(base / "train.tsv", [header, ["0", "a", "b", labels[0]], ["1", "c", "d", labels[1]]])
  _write(base / "dev.tsv", [header, ["0", "e", "f", labels[1]]])
  _write(base / "test.tsv", [header[:3], ["0", "g", "h"]])
  task = tasks.get_task(name)
  train = tasks.read_examples(task, str(tmp_path), "train")
  assert [(e.text_a, e.text_b, e.label) for e in train] == [("a", "b", labels[0]),
                                                           ("c", "d", labels[1])]
  assert tasks.read_examples(task, str(tmp_path), "dev")[0].label == labels[1]
  assert tasks.read_examples(task, str(tmp_path), "test")[0].text_b == "h"


def test_qqp_skips_malformed_rows_and_says_so(tmp_path, caplog):
  header = ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"]
  path = _write(tmp_path / "finetuning_data" / "QQP" / "train.tsv", [
      header, ["0", "1", "2", "How old?", "What age?", "1"],
      ["1", "3", "4", "a question split by a newline"],
      ["2", "5", "6", "Why?", "Why not?", "0"]])
  with caplog.at_level(logging.WARNING):
    examples = tasks.read_examples(tasks.get_task("qqp"), str(tmp_path), "train")
  assert [e.label for e in examples] == ["1", "0"]
  assert f"{path}: skipped 1 malformed rows" in caplog.text and f"{path}:3:" in caplog.text


def test_diagnostic_set_in_both_layouts(tmp_path):
  rows = [["index", "sentence1", "sentence2"], ["0", "The cat sat.", "A cat sat."]]
  task = tasks.get_task("glue/ax")
  _write(tmp_path / "glue_layout" / "finetuning_data" / "diagnostic" / "diagnostic.tsv",
         rows)
  _write(tmp_path / "ours" / "finetuning_data" / "ax" / "test.tsv", rows)
  _write(tmp_path / "original" / "finetuning_data" / "mnli" / "diagnostic.tsv", rows)
  for root in ("glue_layout", "ours", "original"):
    examples = tasks.read_examples(task, str(tmp_path / root), "test")
    assert examples == [SentenceExample(0, "The cat sat.", "A cat sat.",
                                                       None)]


def test_folder_spellings_are_case_sensitive_and_missing_files_name_both(tmp_path):
  rows = [["sentence", "label"], ["fine", "1"]]
  _write(tmp_path / "a" / "finetuning_data" / "sst" / "dev.tsv", rows)
  _write(tmp_path / "b" / "finetuning_data" / "SST-2" / "dev.tsv", rows)
  _write(tmp_path / "c" / "finetuning_data" / "sst-2" / "dev.tsv", rows)
  _write(tmp_path / "glue_data" / "SST-2" / "dev.tsv", rows)  # GLUE's download
  task = tasks.get_task("glue/sst2")
  for root in ("a", "b", "glue_data"):
    assert tasks.read_examples(task, str(tmp_path / root), "dev")[0].label == "1"
  with pytest.raises(DataError) as error:
    tasks.read_examples(task, str(tmp_path / "c"), "dev")
  message = str(error.value)
  assert "missing dev file of glue/sst2" in message
  assert os.path.join("finetuning_data", "sst", "dev.tsv") in message
  assert os.path.join("finetuning_data", "SST-2", "dev.tsv") in message


@pytest.mark.parametrize("name,folder,lines,expected", [
    ("rte", "RTE", [["index", "sentence1", "sentence2", "label"], ["0", "a", "b"]],
     r"dev.tsv:2: expected 4 tab-separated columns \(glue/rte dev layout\), found 3"),
    ("rte", "RTE", [["index", "sentence1", "sentence2", "label"], ["0", "a", "b", "yes"]],
     r"dev.tsv:2: unknown label 'yes' for glue/rte; expected one of entailment, "
     "not_entailment"),
    ("rte", "RTE", [["index", "sentence1", "sentence2", "label"]],
     r"dev.tsv: the dev split of glue/rte has no examples"),
    ("rte", "RTE", [["index", "sentence1", "label"]],
     r"dev.tsv:1: header has 3 columns, expected 4"),
    ("cola", "CoLA", [["src", "1", "", "ok"], ["src", "2", "", "bad label"]],
     r"dev.tsv:2: unknown label '2' for glue/cola"),
    ("sts", "STS-B", [[f"h{i}" for i in range(10)], ["0"] * 9 + ["high"]],
     r"dev.tsv:2: regression target 'high' is not a number"),
    ("sts", "STS-B", [[f"h{i}" for i in range(10)], ["0"] * 9 + ["5.5"]],
     r"dev.tsv:2: regression target 5.5 outside glue/stsb's range \[0.0, 5.0\]"),
])
def test_bad_rows_give_file_line_errors(tmp_path, name, folder, lines, expected):
  _write(tmp_path / "finetuning_data" / folder / "dev.tsv", lines)
  with pytest.raises(DataError, match=expected):
    tasks.read_examples(tasks.get_task(name), str(tmp_path), "dev")


def test_non_utf8_file_and_unknown_split(tmp_path):
  path = tmp_path / "finetuning_data" / "SST-2" / "dev.tsv"
  path.parent.mkdir(parents=True)
  path.write_bytes(b"sentence\tlabel\ncaf\xe9\t1\n")
  task = tasks.get_task("sst")
  with pytest.raises(DataError, match="dev.tsv: not UTF-8 text"):
    tasks.read_examples(task, str(tmp_path), "dev")
  with pytest.raises(DataError, match="has no split 'validation'"):
    tasks.read_examples(task, str(tmp_path), "validation")


def test_both_orders_swaps_pairs_after_the_originals():
  examples = [SentenceExample(0, "a", "b", "1"),
              SentenceExample(1, "c", "d", "0")]
  assert [(e.eid, e.text_a, e.text_b, e.label)
          for e in both_orders(examples)] == [
              (0, "a", "b", "1"), (1, "c", "d", "0"), (2, "b", "a", "1"), (3, "d", "c", "0")]
  assert tasks.get_task("mrpc").symmetric and tasks.get_task("sts").symmetric
  assert not tasks.get_task("rte").symmetric


def test_registry_names_aliases_and_defaults():
  expected = {"cola": "glue/cola", "sst": "glue/sst2", "mrpc": "glue/mrpc",
              "sts": "glue/stsb", "qqp": "glue/qqp", "mnli": "glue/mnli",
              "qnli": "glue/qnli", "rte": "glue/rte", "wnli": "glue/wnli"}
  for alias, name in expected.items():
    assert tasks.get_task(alias).name == name == tasks.get_task(name).name
  assert tasks.get_task("glue/ax").labels == tasks.get_task("mnli").labels
  assert tasks.get_task("sts").is_regression and not tasks.get_task("sst").is_regression
  assert [t.name for t in tasks.get_tasks("sst, glue/rte")] == ["glue/sst2", "glue/rte"]
  with pytest.raises(DataError, match="unknown task 'glue/sst-2'; did you mean 'glue/sst2'"):
    tasks.get_task("glue/sst-2")
  with pytest.raises(DataError, match="listed twice"):
    tasks.get_tasks("sst,glue/sst2")
  assert tasks.task_defaults([tasks.get_task("rte")]) == {"num_train_epochs": 10.0}
  assert tasks.task_defaults([tasks.get_task("sst")]) == {}
  assert tasks.task_defaults(tasks.get_tasks("rte,sts")) == {}


def test_every_task_default_names_a_registered_task():
  from util.hparams import load_preset  # pylint: disable=g-import-not-at-top
  for name in load_preset("finetuning", "task_defaults"):
    assert tasks.get_task(name).name == name


def test_every_model_size_has_a_preset_in_both_phases():
  import json  # pylint: disable=g-import-not-at-top
  from finetune import config as finetune_config  # pylint: disable=g-import-not-at-top
  from pretrain import config as pretrain_config  # pylint: disable=g-import-not-at-top
  with open(os.path.join(ROOT, "configs", "model_sizes.json"), encoding="utf-8") as f:
    sizes = json.load(f)
  for size, dims in sizes.items():
    overrides = {"model_size": size}
    pretrain = pretrain_config.load_config("m", overrides=overrides).model_config()
    finetune = finetune_config.load_config("m", ["sst"], overrides=overrides)
    assert finetune.model_size == size
    for model_config in (pretrain, finetune.model_config()):
      assert {k: getattr(model_config, k) for k in dims} == dims
  # A model pre-trained at debug size fine-tunes with the same sizes when it starts
  # from random weights (the experiment's baseline).
  assert finetune_config.load_config("m", ["sst"], overrides={
      "model_size": "debug"}).model_config().embedding_width == sizes["debug"][
          "hidden_size"]


def _write_custom(tmp_path, spec, files):
  import json  # pylint: disable=g-import-not-at-top
  for name, text in files.items():
    (tmp_path / name).write_text(text, encoding="utf-8")
  path = tmp_path / "task.json"
  path.write_text(json.dumps(spec), encoding="utf-8")
  return str(path)


def test_custom_csv_classification_task(tmp_path):
  spec = {"name": "reviews", "format": "csv", "text_a": "review", "label": "stars",
          "labels": ["bad", "good"], "metric": "f1", "train": "train.csv",
          "dev": "dev.csv", "test": "test.csv"}
  json_path = _write_custom(tmp_path, spec, {
      "train.csv": 'id,review,stars\n1,"Great, really ""great""",good\n2,"Dull\nand long",bad\n',
      "dev.csv": "id,review,stars\n3,fine,good\n",
      "test.csv": "id,review\n4,unseen\n"})
  task = tasks.get_task(json_path)
  assert (task.name, task.labels, task.metrics) == ("reviews", ("bad", "good"), ("f1",))
  train = tasks.read_examples(task, "unused", "train")
  assert [(e.text_a, e.label) for e in train] == [('Great, really "great"', "good"),
                                                  ("Dull\nand long", "bad")]
  assert tasks.read_examples(task, "unused", "test")[0] == \
      SentenceExample(0, "unseen", None, None)
  # A bad label on a row after a multi-line field still gets its own line number.
  (tmp_path / "train.csv").write_text('id,review,stars\n1,"a\nb",good\n2,c,meh\n')
  with pytest.raises(DataError, match=r"train.csv:4: unknown label 'meh' for reviews"):
    tasks.read_examples(task, "unused", "train")


def test_custom_tsv_regression_task_by_column_index(tmp_path):
  spec = {"name": "similarity", "header": False, "text_a": 0, "text_b": 1, "label": 2,
          "regression": True, "train": "train.tsv"}
  json_path = _write_custom(tmp_path, spec, {"train.tsv": "a\tb\t0.5\nc\td\t-1\n"})
  task = tasks.get_task(json_path)
  assert task.is_regression and task.metrics == ("spearman", "pearson")
  assert [(e.text_a, e.text_b, e.label)
          for e in tasks.read_examples(task, "unused", "train")] == [
              ("a", "b", 0.5), ("c", "d", -1.0)]
  (tmp_path / "train.tsv").write_text("a\tb\n")
  with pytest.raises(DataError, match=r"train.tsv:1: expected at least 3 tab-separated"):
    tasks.read_examples(task, "unused", "train")


@pytest.mark.parametrize("spec,expected", [
    ({"lables": ["a", "b"]}, "unknown task file key 'lables'; did you mean 'labels'"),
    ({"regression": True}, 'give either "labels"'),
    ({"labels": ["a", "b"], "metric": "acc"}, r"unknown metric 'acc'; did you mean "
     r"'mcc'\? \(expected one of accuracy, f1, mcc, pearson, spearman\)$"),
    ({"labels": "ab"}, '"labels" must be a list of at least two distinct labels'),
    # A repeated label would train a class no example has.
    ({"labels": ["bad", "good", "bad"]},
     r"task.json: \"labels\" names 'bad' twice; labels must be distinct$"),
    ({"labels": ["a", "b"], "metrics": "f1"}, '"metrics" must be a non-empty list'),
    ({"labels": ["a", "b"], "format": "xlsx"}, '"format" must be "tsv" or "csv"'),
    ({"labels": ["a", "b"], "header": False}, "names column 'text' but \"header\" is false"),
])
def test_custom_task_description_errors(tmp_path, spec, expected):
  base = {"name": "t", "text_a": "text", "label": "label", "train": "train.tsv"}
  if "regression" in spec:
    base["labels"] = ["x", "y"]
  json_path = _write_custom(tmp_path, {**base, **spec}, {})
  with pytest.raises(DataError, match=expected):
    tasks.get_task(json_path)
  (tmp_path / "broken.json").write_text('{"name": "t",,}')
  with pytest.raises(DataError, match=r"broken.json:1: invalid JSON"):
    tasks.get_task(str(tmp_path / "broken.json"))
  (tmp_path / "twice.json").write_text('{"name": "t", "labels": ["a", "b"], "name": "u"}')
  with pytest.raises(DataError, match=r"twice.json: key 'name' appears twice in one JSON "
                     r"object; give each name once$"):
    tasks.get_task(str(tmp_path / "twice.json"))


def test_custom_task_missing_file_is_named(tmp_path):
  json_path = _write_custom(tmp_path, {"name": "t", "text_a": 0, "label": 1, "header": False,
                                       "labels": ["a", "b"], "train": "nope.tsv"}, {})
  with pytest.raises(DataError, match=r"nope.tsv: the train file of task t does not exist"):
    tasks.read_examples(tasks.get_task(json_path), "unused", "train")


def test_tfds_source_when_files_are_absent(tmp_path):
  """A prepared TFDS dataset (mocked records) is read when the files are missing."""
  # Imported here: the other tests of this file run without TensorFlow.
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  # TFDS's own class names, mapped independently to the task's label strings.
  tfds_to_task = {"negative": "0", "positive": "1", "entailment": "entailment",
                  "neutral": "neutral", "contradiction": "contradiction"}
  tfds_splits = {"glue/sst2": {"train": "train", "dev": "validation", "test": "test"},
                 "glue/mnli": {"train": "train", "dev_matched": "validation_matched",
                               "dev_mismatched": "validation_mismatched",
                               "test_matched": "test_matched",
                               "test_mismatched": "test_mismatched"}}
  for name, text_features in (("glue/sst2", ("sentence",)),
                              ("glue/mnli", ("premise", "hypothesis"))):
    task = tasks.get_task(name)
    builder = tfds.builder(name, data_dir=str(tmp_path))
    os.makedirs(builder.data_path)
    builder.info.write_to_directory(builder.data_path)  # marks it prepared
    with tfds.testing.mock_data(num_examples=5, data_dir=str(tmp_path)):
      for split, tfds_split in tfds_splits[name].items():
        examples = tasks.read_examples(task, str(tmp_path / "no_files"), split,
                                        tfds_data_dir=str(tmp_path))
        records = list(tfds.as_numpy(builder.as_dataset(split=tfds_split,
                                                        shuffle_files=False)))
        assert len(examples) == len(records) == 5
        label_names = builder.info.features["label"].names
        for example, record in zip(examples, records):
          texts = [record[f].decode() for f in text_features]
          assert [example.text_a, example.text_b][:len(texts)] == texts
          expected = (None if split.startswith("test")
                      else tfds_to_task[label_names[record["label"]]])
          assert example.label == expected


def test_glue_submission_files(shared_data_dir, tmp_path):
  cola = tasks.get_task("cola")
  examples = tasks.read_examples(cola, shared_data_dir, "test")
  predictions = [i % 2 for i in range(len(examples))]  # label ids
  path = write_glue_submission(cola, "test", examples, predictions,
                                              str(tmp_path))
  assert os.path.basename(path) == "CoLA.tsv"
  rows = _independent_rows(path, header=False)
  assert rows[0] == ["index", "prediction"]
  test_rows = _independent_rows(shared_path("glue", "CoLA", "test.tsv"), header=True)
  assert [r[0] for r in rows[1:]] == [r[0] for r in test_rows]  # GLUE's own index column
  assert [r[1] for r in rows[1:]] == [str(p) for p in predictions]

  sts = tasks.get_task("sts")
  pairs = [SentenceExample(i, "a", "b", None) for i in range(3)]
  path = write_glue_submission(sts, "test", pairs, [-0.2, 2.34567, 7.0],
                                              str(tmp_path))
  assert open(path).read() == "index\tprediction\n0\t0.000\n1\t2.346\n2\t5.000\n"
  mnli = tasks.get_task("mnli")
  names = [os.path.basename(write_glue_submission(
      mnli, split, pairs, [2, 0, 2], str(tmp_path))) for split in mnli.test_splits]
  assert names == ["MNLI-m.tsv", "MNLI-mm.tsv"]
  assert open(tmp_path / "MNLI-mm.tsv").read().split("\n")[1:4] == [
      "0\tneutral", "1\tcontradiction", "2\tneutral"]
