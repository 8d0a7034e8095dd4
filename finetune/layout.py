"""Where task files live: <data_dir>/finetuning_data/<task folder>/<split file>.

A task accepts several folder names (the original ELECTRA's, e.g. `sst`, and GLUE's own,
e.g. `SST-2`), matched exactly and case-sensitively. The folder may also sit directly in
<data_dir>, as in GLUE's download (glue_data/SST-2/train.tsv). A missing file is one
error naming every accepted location. A user's task names its files in its task file.
"""

import os
from typing import Dict, Sequence

from finetune.errors import DataError


def find_split_file(data_dir: str, task_name: str, split: str, folders: Sequence[str],
                    file_names: Sequence[str], expected_format: str) -> str:
  """The first existing accepted file of `split`, or a DataError listing them all."""
  candidates = []
  for root in (os.path.join(data_dir, "finetuning_data"), data_dir):
    present = set(os.listdir(root)) if os.path.isdir(root) else set()
    for folder in folders:
      for file_name in file_names:
        path = os.path.join(root, folder, file_name)
        if folder in present and os.path.isfile(path):
          return path
        candidates.append(path)
  raise DataError(f"{candidates[0]}: missing {split} file of {task_name}; expected "
                  f"{' or '.join(candidates)} ({expected_format})")


def own_file(files: Dict[str, str], split: str, task_name: str) -> str:
  """A user's task's file of `split` (named in its task file), or a DataError when it
  is missing."""
  path = files[split]
  if not os.path.isfile(path):
    raise DataError(f"{path}: the {split} file of task {task_name} " + (
        "is a directory" if os.path.isdir(path) else "does not exist"))
  return path
