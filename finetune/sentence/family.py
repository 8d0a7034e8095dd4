"""The sentence family's declaration (finetune/family.py): its config fields, and its
tasks: GLUE's (labels, metrics, the column layout of every split as GLUE's files lay them
out, in the original ELECTRA folder names and GLUE's own, their TFDS names and their
submission files) and users' (each read from its JSON description)."""

import dataclasses

from finetune.errors import DataError
from finetune.family import Family, task_file_metrics, task_file_splits
from finetune.sentence import data
from finetune.sentence import metrics as sentence_metrics
from finetune.sentence.data import SentenceTask, SplitLayout
from util import hparams
from util.hparams import first_repeated


def _glue_tsv(name, original, glue_folder, labels, task_metrics, train, test,
              **kwargs) -> SentenceTask:
  """A GLUE task whose files are train.tsv, dev.tsv (laid out like train) and test.tsv."""
  # GLUE's folder names double as its submission file names (CoLA.tsv, SST-2.tsv, ...).
  splits = {"train": dataclasses.replace(train, file_names=("train.tsv",)),
            "dev": dataclasses.replace(train, file_names=("dev.tsv",)),
            "test": dataclasses.replace(test, file_names=("test.tsv",))}
  return SentenceTask(
      name="glue/" + name, aliases=(original,),
      folders=(original, glue_folder), splits=splits, labels=labels,
      metrics=task_metrics, tfds_name="glue/" + name,
      submission_files={"test": glue_folder + ".tsv"}, **kwargs)


_BINARY = ("0", "1")
_ENTAILMENT = ("entailment", "not_entailment")
_MNLI_LABELS = ("contradiction", "entailment", "neutral")  # the original's order
_MNLI_TFDS_LABELS = ("entailment", "neutral", "contradiction")  # TFDS's class ids
# MNLI and the diagnostic set: index, ids, genre and parses, then sentence1, sentence2.
_MNLI_LAYOUT = SplitLayout((), text_a=8, text_b=9, column_names=("sentence1", "sentence2"))
# RTE, QNLI and WNLI: index, sentence1, sentence2, label.
_INDEX_PAIR = SplitLayout((), text_a=1, text_b=2, label=3, num_columns=4)
_INDEX_PAIR_TEST = SplitLayout((), text_a=1, text_b=2, num_columns=3)

GLUE_TASKS = (
    _glue_tsv("cola", "cola", "CoLA", _BINARY, ("mcc",),
              # train/dev: source, label, original annotation, sentence; no header.
              train=SplitLayout((), text_a=3, label=1, header=False, num_columns=4),
              test=SplitLayout((), text_a=1, num_columns=2),
              tfds_features=("sentence",)),
    _glue_tsv("sst2", "sst", "SST-2", _BINARY, ("accuracy",),
              train=SplitLayout((), text_a=0, label=1, num_columns=2),
              test=SplitLayout((), text_a=1, num_columns=2),
              tfds_features=("sentence",)),
    _glue_tsv("mrpc", "mrpc", "MRPC", _BINARY, ("accuracy", "f1"),
              # Quality, #1 ID, #2 ID, #1 String, #2 String (test: index first).
              train=SplitLayout((), text_a=3, text_b=4, label=0, num_columns=5),
              test=SplitLayout((), text_a=3, text_b=4, num_columns=5,
                               column_names=("#1 String", "#2 String")),
              symmetric=True, tfds_features=("sentence1", "sentence2")),
    _glue_tsv("stsb", "sts", "STS-B", None, ("spearman", "pearson"),
              # index, genre, filename, year, old_index, source1, source2, s1, s2, score.
              train=SplitLayout((), text_a=7, text_b=8, label=9, num_columns=10),
              test=SplitLayout((), text_a=7, text_b=8, num_columns=9),
              label_range=(0.0, 5.0), symmetric=True,
              tfds_features=("sentence1", "sentence2")),
    _glue_tsv("qqp", "qqp", "QQP", _BINARY, ("accuracy", "f1"),
              # id, qid1, qid2, question1, question2, is_duplicate (test: id, q1, q2).
              train=SplitLayout((), text_a=3, text_b=4, label=5, num_columns=6),
              test=SplitLayout((), text_a=1, text_b=2, num_columns=3),
              skip_malformed_rows=True, tfds_features=("question1", "question2")),
    SentenceTask(
        name="glue/mnli", aliases=("mnli",), folders=("mnli", "MNLI"), labels=_MNLI_LABELS,
        tfds_labels=_MNLI_TFDS_LABELS, metrics=("accuracy",),
        splits={
            "train": dataclasses.replace(_MNLI_LAYOUT, file_names=("train.tsv",),
                                         label=11, num_columns=12),
            # Five annotators' labels, then the gold label.
            "dev_matched": dataclasses.replace(
                _MNLI_LAYOUT, file_names=("dev_matched.tsv",), label=15, num_columns=16),
            "dev_mismatched": dataclasses.replace(
                _MNLI_LAYOUT, file_names=("dev_mismatched.tsv",), label=15,
                num_columns=16),
            "test_matched": dataclasses.replace(
                _MNLI_LAYOUT, file_names=("test_matched.tsv",), num_columns=10),
            "test_mismatched": dataclasses.replace(
                _MNLI_LAYOUT, file_names=("test_mismatched.tsv",), num_columns=10),
        },
        eval_splits=("dev_matched", "dev_mismatched"),
        test_splits=("test_matched", "test_mismatched"),
        tfds_name="glue/mnli", tfds_features=("premise", "hypothesis"),
        submission_files={"test_matched": "MNLI-m.tsv", "test_mismatched": "MNLI-mm.tsv"}),
    _glue_tsv("qnli", "qnli", "QNLI", _ENTAILMENT, ("accuracy",),
              train=_INDEX_PAIR, test=_INDEX_PAIR_TEST,
              tfds_features=("question", "sentence")),
    _glue_tsv("rte", "rte", "RTE", _ENTAILMENT, ("accuracy",),
              train=_INDEX_PAIR, test=_INDEX_PAIR_TEST,
              tfds_features=("sentence1", "sentence2")),
    _glue_tsv("wnli", "wnli", "WNLI", _BINARY, ("accuracy",),
              train=_INDEX_PAIR, test=_INDEX_PAIR_TEST,
              tfds_features=("sentence1", "sentence2")),
    # The diagnostic set: predictions of an MNLI model, no labels and no training data.
    # GLUE ships it as diagnostic/diagnostic.tsv; the original read mnli/diagnostic.tsv.
    SentenceTask(
        name="glue/ax", aliases=("ax",), folders=("ax", "diagnostic", "mnli"),
        labels=_MNLI_LABELS, tfds_labels=_MNLI_TFDS_LABELS, metrics=(),
        splits={"test": SplitLayout(("test.tsv", "diagnostic.tsv"), text_a=1, text_b=2,
                                    num_columns=3, column_names=("sentence1", "sentence2"))},
        eval_splits=(), test_splits=("test",), train_split="",
        tfds_name="glue/ax", tfds_features=("premise", "hypothesis"),
        submission_files={"test": "AX.tsv"}),
)


_CUSTOM_KEYS = ("name", "format", "header", "text_a", "text_b", "label", "labels",
                "regression", "metrics", "metric", "train", "dev", "test", "symmetric")


def load_custom_task(json_path: str, spec: dict) -> SentenceTask:
  """A user's classification/regression task described by a JSON file, e.g.

    {"name": "reviews", "format": "csv", "header": true, "text_a": "review",
     "label": "stars", "labels": ["1", "2", "3"], "metric": "accuracy",
     "train": "train.csv", "dev": "dev.csv", "test": "test.csv"}

  Columns are header names or 0-based indices; "regression": true replaces "labels";
  "metric" (or a "metrics" list) names finetune.sentence.metrics.SENTENCE_METRICS, where "f1"
  takes the second label as the positive class; "symmetric": true trains on both orders
  of text_a/text_b. File paths are relative to the JSON file; a test file may lack the
  label column (with columns given by index it is always read without labels).
  """
  def problem(text):
    return DataError(f"{json_path}: {text}")

  files = task_file_splits(json_path, spec, _CUSTOM_KEYS)
  for key in ("text_a", "label"):
    if key not in spec:
      raise problem(f"missing {key!r}")
  regression = bool(spec.get("regression", False))
  if regression == ("labels" in spec):
    raise problem('give either "labels": [...] (classification) or "regression": true')
  if not regression and (not isinstance(spec["labels"], list) or
                         len(set(map(str, spec["labels"]))) < 2):
    raise problem('"labels" must be a list of at least two distinct labels')
  labels = None if regression else tuple(str(label) for label in spec["labels"])
  # A repeated label would be a class of its own that no example can be: its head
  # would have a dead output, and --predict would name the wrong one of the two.
  repeated = first_repeated(labels or ())
  if repeated is not None:
    raise problem(f'"labels" names {repeated!r} twice; labels must be distinct')
  file_format = spec.get("format", "tsv")
  if file_format not in ("tsv", "csv"):
    raise problem(f'"format" must be "tsv" or "csv", got {file_format!r}')
  header = bool(spec.get("header", True))
  columns = {role: spec.get(role) for role in ("text_a", "text_b", "label")}
  for role, column in columns.items():
    if column is not None and not isinstance(column, (int, str)):
      raise problem(f'"{role}" must be a column name or a 0-based index')
    if isinstance(column, str) and not header:
      raise problem(f'"{role}" names column {column!r} but "header" is false; use an index')
  task_metrics = task_file_metrics(json_path, spec, sentence_metrics.SENTENCE_METRICS,
                                   ["spearman", "pearson"] if regression else ["accuracy"])
  splits = {split: SplitLayout(
      (), text_a=columns["text_a"], text_b=columns["text_b"], header=header,
      label=None if split == "test" and isinstance(columns["label"], int)
      else columns["label"]) for split in files}
  return SentenceTask(
      name=spec["name"], folders=(), splits=splits, labels=labels,
      metrics=task_metrics, eval_splits=("dev",) if "dev" in splits else (),
      test_splits=("test",) if "test" in splits else (),
      symmetric=bool(spec.get("symmetric", False)), file_format=file_format,
      files=files)


@dataclasses.dataclass(frozen=True)
class SentenceSettings:
  double_unordered: bool = hparams.field(
      True, help="MRPC and STS-B train on both sentence orders.")


def _runner():
  from finetune.sentence.model import SentenceRunner  # pylint: disable=g-import-not-at-top
  return SentenceRunner


FAMILY = Family(name="sentence", task_type=SentenceTask, tasks=GLUE_TASKS,
                split_file=data.split_file, read_file=data.read_file,
                read_tfds=data.read_tfds, runner=_runner,
                settings=SentenceSettings, load_task_file=load_custom_task)
