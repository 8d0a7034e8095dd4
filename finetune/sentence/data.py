"""The sentence family's data: its types (a task, the layout of its files' splits, an
example), a split's examples from the task's files (GLUE-style TSVs, users' TSV/CSV
files) or else TFDS, and the model's inputs.

The features are [CLS] A [SEP] (B [SEP]), truncated as the original: the longer text
loses its last token until the pair fits max_seq_length - 3 (B when they tie); a single
text keeps max_seq_length - 2 tokens.
"""

import csv
import dataclasses
import logging
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from data_prep.tokenizer import Tokenizer
from finetune import tfds_source
from finetune.errors import DataError, at
from finetune.layout import find_split_file, own_file
from finetune.windows import text_ids

Column = Union[int, str]  # a 0-based index, or a header name (users' tasks only)
Label = Union[str, float]


@dataclasses.dataclass(frozen=True)
class SentenceExample:
  eid: int                 # row number among the split's examples (GLUE submission index)
  text_a: str
  text_b: Optional[str]
  label: Optional[Label]   # None in unlabeled (test) splits


@dataclasses.dataclass(frozen=True)
class SplitLayout:
  """Where one split's file is and which columns hold what."""
  file_names: Tuple[str, ...]      # accepted names inside the task folder, in order
  text_a: Column
  text_b: Optional[Column] = None
  label: Optional[Column] = None   # None: the split has no labels (test sets)
  header: bool = True
  num_columns: Optional[int] = None  # exact column count; None: as many as used
  # The header's names of text_a [, text_b] in the task's own files, where they are not
  # TFDS's feature names (MRPC's "#1 String", MNLI's "sentence1").
  column_names: Tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class SentenceTask:
  """A classification (labels given) or regression (labels None) task."""
  name: str                          # canonical name, e.g. "glue/sst2"
  folders: Tuple[str, ...]           # accepted folder names under finetuning_data/
  splits: Dict[str, SplitLayout]
  labels: Optional[Tuple[str, ...]]  # None for regression
  metrics: Tuple[str, ...]           # the first one selects models and is reported first
  eval_splits: Tuple[str, ...] = ("dev",)
  test_splits: Tuple[str, ...] = ("test",)
  aliases: Tuple[str, ...] = ()
  label_range: Optional[Tuple[float, float]] = None  # regression targets must lie here
  symmetric: bool = False            # pair order carries no meaning: train on both orders
  skip_malformed_rows: bool = False  # QQP's train file has broken rows the original skips
  file_format: str = "tsv"           # "tsv" (no quoting, like GLUE) or "csv"
  tfds_name: Optional[str] = None    # e.g. "glue/sst2"
  tfds_features: Tuple[str, ...] = ()           # TFDS feature names of text_a [, text_b]
  # TFDS stores labels as class ids: the label strings of ids 0, 1, ... where they are
  # not `labels`' order (GLUE's 0/1 tasks name their classes, e.g.
  # not_equivalent/equivalent, in that order).
  tfds_labels: Optional[Tuple[str, ...]] = None
  submission_files: Dict[str, str] = dataclasses.field(default_factory=dict)  # GLUE's
  train_split: str = "train"
  # A user's task (its task file, family.py): the path of each split's file.
  files: Dict[str, str] = dataclasses.field(default_factory=dict)

  @property
  def is_regression(self) -> bool:
    return self.labels is None

  def layout(self, split: str) -> "SplitLayout":
    """`split`'s layout; a DataError for a split the task lacks."""
    if split not in self.splits:
      raise DataError(f"task {self.name} has no split {split!r} (it has "
                      f"{', '.join(self.splits)})")
    return self.splits[split]


def both_orders(examples: Sequence[SentenceExample]) -> List[SentenceExample]:
  """The examples followed by copies with the two texts swapped (MRPC/STS-B training)."""
  if any(e.text_b is None for e in examples):
    raise ValueError("both_orders needs sentence pairs; an example has no text_b")
  offset = len(examples)
  return list(examples) + [
      dataclasses.replace(e, eid=e.eid + offset, text_a=e.text_b, text_b=e.text_a)
      for e in examples]


def split_file(task: SentenceTask, data_dir: str, split: str) -> str:
  layout = task.layout(split)
  if task.files:
    return own_file(task.files, split, task.name)
  return find_split_file(data_dir, task.name, split, task.folders, layout.file_names,
                         "GLUE TSV layout")


def _rows(path: str, file_format: str) -> Iterator[Tuple[int, List[str]]]:
  """(line number, fields) of each row, [] for a blank one; a UTF-8 byte-order mark is
  dropped."""
  try:
    with open(path, encoding="utf-8-sig", newline="") as f:
      if file_format == "csv":
        reader = csv.reader(f)
        line = 1
        for fields in reader:
          yield line, fields
          line = reader.line_num + 1
      else:
        # GLUE's TSVs are not quoted (sentences hold unbalanced quotes): split on tabs.
        for line, text in enumerate(f, start=1):
          text = text.rstrip("\r\n")
          yield line, text.split("\t") if text else []
  except UnicodeDecodeError as e:
    raise DataError(f"{path}: not UTF-8 text (byte {e.start}: {e.reason})") from None
  except csv.Error as e:
    raise DataError(f"{path}: malformed CSV: {e}") from None


def _resolve_columns(layout: SplitLayout, header: Optional[List[str]], path: str,
                     line: int, unlabeled_ok: bool) -> Dict[str, Optional[int]]:
  """Column indices of text_a/text_b/label, looking names up in the header row."""
  resolved = {}
  for role in ("text_a", "text_b", "label"):
    column = getattr(layout, role)
    if role == "label" and unlabeled_ok and isinstance(column, str) and header \
        and column not in header:
      column = None  # a test file without the label column
    if isinstance(column, str):
      if header is None or column not in header:
        raise at(path, line, f"no column named {column!r} for {role} (header: "
                             f"{', '.join(header or [])})")
      column = header.index(column)
    resolved[role] = column
  return resolved


def iter_file(task: SentenceTask, layout: SplitLayout, path: str, where: str,
              unlabeled_ok: bool, skipped: Optional[List[str]] = None
              ) -> Iterator[SentenceExample]:
  """Examples of one TSV/CSV file laid out as `layout`, read as they come. `where`
  names the layout in errors ("glue/sst2 dev"); malformed rows of a task that skips
  them are appended to `skipped`."""
  columns, eid = None, -1
  for line, fields in _rows(path, task.file_format):
    if not fields and columns is None and layout.header:  # blank lines before a header
      continue
    if columns is None and fields:  # the first row: the header, or the first example
      header = fields if layout.header else None
      columns = _resolve_columns(layout, header, path, line, unlabeled_ok)
      needed = layout.num_columns or 1 + max(c for c in columns.values() if c is not None)
      if header is not None:
        if layout.num_columns and len(header) != needed:
          raise at(path, line, f"header has {len(header)} columns, expected {needed} "
                               f"({where} layout)")
        continue
    eid += 1  # each row after the header, blank or skipped too, keeps its number
    if not fields:
      continue
    wrong_count = (len(fields) != needed if layout.num_columns else len(fields) < needed)
    if wrong_count:
      problem = (f"expected {'' if layout.num_columns else 'at least '}{needed} "
                 f"{'tab' if task.file_format == 'tsv' else 'comma'}-separated columns "
                 f"({where} layout), found {len(fields)}")
      if task.skip_malformed_rows and skipped is not None:
        skipped.append(f"{path}:{line}: {problem}")
        continue
      raise at(path, line, problem)
    label = None
    if columns["label"] is not None:
      label = _parse_label(task, fields[columns["label"]], path, line)
    text_b = fields[columns["text_b"]] if columns["text_b"] is not None else None
    yield SentenceExample(eid=eid, text_a=fields[columns["text_a"]], text_b=text_b,
                          label=label)


def read_file(task: SentenceTask, path: str, split: str) -> List[SentenceExample]:
  skipped = []
  examples = list(iter_file(task, task.layout(split), path, f"{task.name} {split}",
                            split in task.test_splits, skipped))
  if skipped:
    # The original skips QQP's broken rows too; say how many and show the first.
    logging.warning("%s: skipped %d malformed rows, first: %s", path, len(skipped),
                    skipped[0])
  if not examples:
    raise DataError(f"{path}: the {split} split of {task.name} has no examples")
  return examples


def unlabeled_layout(task: SentenceTask, path: Optional[str] = None
                     ) -> Tuple[str, SplitLayout]:
  """(name, layout) of the task's files without labels: its test split's, else its
  training split's with the label column ignored. A file at `path` whose header names
  the task's text columns (TFDS's names: sentence, sentence1 and sentence2,
  question1 and question2, ...; or those of its own test file) is read by those names,
  whatever its other columns; a header naming none of them is refused, saying what
  was expected (read by position, it would predict on the wrong column)."""
  split = task.test_splits[0] if task.test_splits else task.train_split
  layout = dataclasses.replace(task.layout(split), label=None)
  known = [names for names in (task.tfds_features, layout.column_names) if names]
  if path is not None and known and layout.header:
    line, header = next(((line, fields) for line, fields in _rows(path, task.file_format)
                         if fields), (0, None))
    names = next((names for names in known if set(names) <= set(header or ())), None)
    if names is None and header is not None:  # (an empty file has no inputs: said later)
      expected = " or ".join(" and ".join(repr(n) for n in names) for names in known)
      raise at(path, line, f"the header ({', '.join(header)}) names no column "
                           f"{task.name} reads; expected a header row naming {expected} "
                           "(its text columns; other columns are ignored)")
    if names is not None:
      layout = SplitLayout(layout.file_names, text_a=names[0],
                           text_b=names[1] if len(names) > 1 else None)
      split = f"{split} (columns by header name)"
  return split, layout


def _parse_label(task: SentenceTask, text: str, path: str, line: int) -> Label:
  text = text.strip()
  if not task.is_regression:
    if text not in task.labels:
      raise at(path, line, f"unknown label {text!r} for {task.name}; expected one of "
                           f"{', '.join(task.labels)}")
    return text
  try:
    value = float(text)
  except ValueError:
    raise at(path, line, f"regression target {text!r} is not a number") from None
  if task.label_range and not task.label_range[0] <= value <= task.label_range[1]:
    raise at(path, line, f"regression target {value} outside {task.name}'s range "
                         f"[{task.label_range[0]}, {task.label_range[1]}]")
  return value


def read_tfds(task: SentenceTask, split: str, builder) -> List[SentenceExample]:
  """Examples of a TFDS dataset, which names GLUE's dev splits validation (...)."""
  task.layout(split)  # a split the task lacks is refused
  tfds_split = split.replace("dev", "validation")
  labelled = split not in task.test_splits
  class_labels = task.tfds_labels or task.labels
  examples = []
  for record in tfds_source.records(builder, tfds_split):
    texts = [record[name].decode("utf-8") for name in task.tfds_features]
    label = None
    if labelled:
      label = (float(record["label"]) if task.is_regression
               else class_labels[int(record["label"])])
    examples.append(SentenceExample(eid=len(examples), text_a=texts[0],
                                    text_b=texts[1] if len(texts) > 1 else None,
                                    label=label))
  if not examples:
    raise DataError(f"TFDS {task.tfds_name} split {tfds_split} is empty")
  return examples


def truncate_pair(a: list, b: list, max_tokens: int):
  while len(a) + len(b) > max_tokens:
    (a if len(a) > len(b) else b).pop()


def encode(tokenizer: Tokenizer, examples, max_seq_length: int) -> Dict[str, np.ndarray]:
  """int32 input_ids, input_mask, segment_ids [N, max_seq_length] for the examples."""
  vocab = tokenizer.vocab.ids
  cls_id, sep_id = vocab["[CLS]"], vocab["[SEP]"]
  texts_a = text_ids(tokenizer, [e.text_a for e in examples])
  paired = [i for i, e in enumerate(examples) if e.text_b is not None]
  texts_b = dict(zip(paired, text_ids(tokenizer, [examples[i].text_b for i in paired])))
  n = len(examples)
  out = {name: np.zeros([n, max_seq_length], np.int32)
         for name in ("input_ids", "input_mask", "segment_ids")}
  for i in range(n):
    a = list(texts_a[i])
    b = list(texts_b[i]) if i in texts_b else None
    if b is None:
      a = a[:max_seq_length - 2]
      ids, segments = [cls_id] + a + [sep_id], [0] * (len(a) + 2)
    else:
      truncate_pair(a, b, max_seq_length - 3)
      ids = [cls_id] + a + [sep_id] + b + [sep_id]
      segments = [0] * (len(a) + 2) + [1] * (len(b) + 1)
    out["input_ids"][i, :len(ids)] = ids
    out["input_mask"][i, :len(ids)] = 1
    out["segment_ids"][i, :len(ids)] = segments
  return out
