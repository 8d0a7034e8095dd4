"""The sentence family's files: GLUE-style TSVs and users' TSV/CSV files, read by the
layout of each split (`<data_dir>/finetuning_data/<task>/<split>.tsv`, see
finetune.layout; a user's task's files beside its JSON description)."""

import csv
import dataclasses
import itertools
import logging
import os
from typing import Dict, Iterator, List, Optional, Tuple

from finetune.errors import DataError, at
from finetune.layout import find_split_file
from finetune.sentence.task import Label, SentenceExample, SentenceTask, SplitLayout


def split_file(task: SentenceTask, data_dir: str, split: str) -> str:
  """The existing file of `split`, or a DataError naming every accepted location."""
  layout = task.layout(split)
  if task.files_dir is not None:
    path = os.path.join(task.files_dir, layout.file_names[0])
    if not os.path.isfile(path):
      raise DataError(f"{path}: the {split} file of task {task.name} " + (
          "is a directory" if os.path.isdir(path) else "does not exist"))
    return path
  return find_split_file(data_dir, task.name, split, task.folders, layout.file_names,
                         "GLUE TSV layout")


def _rows(path: str, file_format: str) -> Iterator[Tuple[int, List[str]]]:
  """(line number, fields) of each non-blank row; a UTF-8 byte-order mark is dropped."""
  try:
    with open(path, encoding="utf-8-sig", newline="") as f:
      if file_format == "csv":
        reader = csv.reader(f)
        line = 1
        for fields in reader:
          if fields:
            yield line, fields
          line = reader.line_num + 1
      else:
        # GLUE's TSVs are not quoted (sentences hold unbalanced quotes): split on tabs.
        for line, text in enumerate(f, start=1):
          text = text.rstrip("\r\n")
          if text:
            yield line, text.split("\t")
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
  """Examples of one TSV/CSV file laid out as `layout`, read as they come.

  `where` names the layout in errors ("glue/sst2 dev"); malformed rows of a task that
  skips them are appended to `skipped`.
  """
  columns, eid = None, 0
  for line, fields in _rows(path, task.file_format):
    if columns is None:  # the first row: the header, or the first example
      header = fields if layout.header else None
      columns = _resolve_columns(layout, header, path, line, unlabeled_ok)
      needed = layout.num_columns or 1 + max(c for c in columns.values() if c is not None)
      if header is not None:
        if layout.num_columns and len(header) != needed:
          raise at(path, line, f"header has {len(header)} columns, expected {needed} "
                               f"({where} layout)")
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
    eid += 1


def read_split_file(task: SentenceTask, split: str, path: str,
                    max_examples: Optional[int] = None) -> List[SentenceExample]:
  """Examples of `split` from one TSV/CSV file laid out as the task defines."""
  skipped = []
  examples = list(itertools.islice(
      iter_file(task, task.layout(split), path, f"{task.name} {split}",
                split in task.test_splits, skipped), max_examples))
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
    line, header = next(iter(_rows(path, task.file_format)), (0, None))
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

