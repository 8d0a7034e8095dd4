"""A user's sentence task: a small JSON file naming its files, columns, labels and
metrics (docs/finetuning.md, "A task of your own")."""

import json
import os

from finetune.errors import DataError
from finetune.sentence import metrics as sentence_metrics
from finetune.sentence.task import SentenceTask, SplitLayout
from util.hparams import HParamsError, first_repeated, load_json, unknown_name_message

_CUSTOM_KEYS = ("name", "format", "header", "text_a", "text_b", "label", "labels",
                "regression", "metrics", "metric", "train", "dev", "test", "symmetric")


def load_custom_task(json_path: str) -> SentenceTask:
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
  try:
    with open(json_path, encoding="utf-8") as f:
      spec = load_json(f.read(), json_path)
  except HParamsError as e:
    raise DataError(str(e)) from None
  except json.JSONDecodeError as e:
    raise DataError(f"{json_path}:{e.lineno}: invalid JSON: {e.msg}") from None
  except OSError as e:
    raise DataError(f"{json_path}: cannot read the task description ({e.strerror})") \
        from None
  except UnicodeDecodeError as e:
    raise DataError(f"{json_path}: not UTF-8 text (byte {e.start}); expected the task's "
                    "JSON description") from None

  def problem(text):
    return DataError(f"{json_path}: {text}")

  if not isinstance(spec, dict):
    raise problem("expected a JSON object describing the task")
  for key in spec:
    if key not in _CUSTOM_KEYS:
      raise problem(unknown_name_message(key, _CUSTOM_KEYS, "task description key"))
  for key in ("name", "text_a", "label", "train"):
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
  task_metrics = spec.get("metrics", [spec["metric"]] if "metric" in spec else
                          ["spearman", "pearson"] if regression else ["accuracy"])
  if not isinstance(task_metrics, list) or not task_metrics:
    raise problem('"metrics" must be a non-empty list of metric names')
  for name in task_metrics:
    if name not in sentence_metrics.SENTENCE_METRICS:
      raise problem(unknown_name_message(name, sentence_metrics.SENTENCE_METRICS, "metric",
                                         list_valid=True))
  splits = {}
  for split in ("train", "dev", "test"):
    if split in spec:
      label = None if split == "test" and isinstance(columns["label"], int) \
          else columns["label"]
      splits[split] = SplitLayout((spec[split],), text_a=columns["text_a"],
                                  text_b=columns["text_b"], label=label, header=header)
  return SentenceTask(
      name=str(spec["name"]), folders=(), splits=splits, labels=labels,
      metrics=tuple(task_metrics), eval_splits=("dev",) if "dev" in splits else (),
      test_splits=("test",) if "test" in splits else (),
      symmetric=bool(spec.get("symmetric", False)), file_format=file_format,
      files_dir=os.path.dirname(os.path.abspath(json_path)))

