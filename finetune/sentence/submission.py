"""GLUE submission files: test predictions as GLUE's server takes them."""

import os
from typing import Sequence

from finetune.errors import DataError
from finetune.sentence.task import SentenceExample, SentenceTask
from util.files import atomic_write


def write_glue_submission(task: SentenceTask, split: str,
                          examples: Sequence[SentenceExample], predictions: Sequence,
                          out_dir: str) -> str:
  """Writes test predictions as GLUE's server takes them (index, prediction); its path.

  `predictions` are label strings or label ids (classification) or scores (regression,
  clipped to the task's range), in the order of `examples`.
  """
  if split not in task.submission_files:
    raise DataError(f"task {task.name} has no GLUE submission file for split {split!r}")
  if len(predictions) != len(examples):
    raise ValueError(f"{len(predictions)} predictions for {len(examples)} examples")
  path = os.path.join(out_dir, task.submission_files[split])
  with atomic_write(path) as f:
    f.write("index\tprediction\n")
    for example, prediction in zip(examples, predictions):
      if task.is_regression:
        low, high = task.label_range or (float("-inf"), float("inf"))
        prediction = f"{min(max(float(prediction), low), high):.3f}"
      elif not isinstance(prediction, str):
        prediction = task.labels[int(prediction)]
      f.write(f"{example.eid}\t{prediction}\n")
  return path

