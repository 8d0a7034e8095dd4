"""The sentence family's types: a task, the layout of its files' splits, an example.

A task is a classification (labels given) or regression (labels None) over one text or
a pair; glue.py lists GLUE's, user_task.py reads a user's from its JSON description.
"""

import dataclasses
from typing import Dict, List, Optional, Sequence, Tuple, Union

from finetune.errors import DataError

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
  tfds_splits: Dict[str, str] = dataclasses.field(default_factory=dict)
  submission_files: Dict[str, str] = dataclasses.field(default_factory=dict)  # GLUE's
  train_split: str = "train"
  files_dir: Optional[str] = None    # users' tasks: file names are relative to this

  @property
  def is_regression(self) -> bool:
    return self.labels is None

  def label_id(self, label: str) -> int:
    return self.labels.index(label)

  def layout(self, split: str) -> "SplitLayout":
    """Where `split`'s file is and which columns hold what; a DataError for a split the
    task lacks."""
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

