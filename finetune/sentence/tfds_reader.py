"""The sentence family's tasks from TensorFlow Datasets, where a task is prepared there."""

from typing import List, Optional

from finetune import tfds_source
from finetune.errors import DataError
from finetune.sentence.glue import TFDS_CLASS_LABELS
from finetune.sentence.task import SentenceExample, SentenceTask


def read_tfds(task: SentenceTask, split: str, tfds_data_dir: Optional[str] = None,
              max_examples: Optional[int] = None, builder=None) -> List[SentenceExample]:
  """Examples from a locally prepared TFDS dataset (or `builder`); never downloads."""
  if builder is None:
    builder = tfds_source.prepared_builder(task.tfds_name, tfds_data_dir)
  if builder is None:
    raise DataError(f"TensorFlow Datasets has no prepared {task.tfds_name} in "
                    f"{tfds_data_dir or 'its default data_dir'}")
  if split not in task.tfds_splits:
    raise DataError(f"task {task.name} has no split {split!r} in TFDS")
  labelled = split not in task.test_splits
  class_labels = TFDS_CLASS_LABELS.get(task.name, task.labels)
  examples = []
  for record in tfds_source.records(builder, task.tfds_splits[split], max_examples):
    texts = [record[name].decode("utf-8") for name in task.tfds_features]
    label = None
    if labelled:
      label = (float(record["label"]) if task.is_regression
               else class_labels[int(record["label"])])
    examples.append(SentenceExample(eid=len(examples), text_a=texts[0],
                                    text_b=texts[1] if len(texts) > 1 else None,
                                    label=label))
  if not examples:
    raise DataError(f"TFDS {task.tfds_name} split {task.tfds_splits[split]} is empty")
  return examples

