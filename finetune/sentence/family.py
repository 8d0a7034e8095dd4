"""The sentence family's declaration (finetune/family.py): GLUE and users' tasks."""

import dataclasses

from finetune.family import Family
from finetune.sentence import data, glue, user_task
from finetune.sentence.task import SentenceTask


@dataclasses.dataclass(frozen=True)
class SentenceSettings:
  """The config fields of sentence tasks."""
  double_unordered: bool = True  # MRPC/STS-B: train on both sentence orders


def _runner():
  from finetune.sentence.runner import SentenceRunner  # pylint: disable=g-import-not-at-top
  return SentenceRunner


FAMILY = Family(name="sentence", task_type=SentenceTask, tasks=glue.GLUE_TASKS,
                read_examples=data.read_examples, runner=_runner,
                settings=SentenceSettings, task_file_suffix=".json",
                load_task_file=user_task.load_custom_task)
