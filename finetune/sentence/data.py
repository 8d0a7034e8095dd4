"""The sentence family's reader: a split's examples from the task's files, else TFDS.

Readers return `SentenceExample`s (task.py); tokenization happens in features.py.
"""

from typing import List, Optional

from finetune import tfds_source
from finetune.errors import DataError
from finetune.sentence import files, tfds_reader
from finetune.sentence.task import SentenceExample, SentenceTask


def read_examples(task: SentenceTask, data_dir: str, split: str,
                  max_examples: Optional[int] = None, tfds_data_dir: Optional[str] = None,
                  fetch_missing: bool = False) -> List[SentenceExample]:
  """Examples of a split from the task's files or, when they are missing, from TFDS:
  prepared in `tfds_data_dir`, or (with `fetch_missing`) downloaded and prepared now."""
  try:
    path = files.split_file(task, data_dir, split)
  except DataError as missing:
    if task.files_dir is not None:
      raise
    builder = tfds_source.instead_of_missing_files(missing, task.tfds_name,
                                                   tfds_data_dir, fetch_missing)
    if builder is None:
      raise
    return tfds_reader.read_tfds(task, split, tfds_data_dir, max_examples, builder)
  return files.read_split_file(task, split, path, max_examples)

