"""The tagging family's declaration (finetune/family.py): CoNLL-2000 chunking."""

from finetune.family import Family
from finetune.tagging import data


def _runner():
  from finetune.tagging.model import TaggingRunner  # pylint: disable=g-import-not-at-top
  return TaggingRunner


FAMILY = Family(name="tagging", task_type=data.TaggingTask, tasks=(data.CHUNKING,),
                read_examples=data.read_examples, runner=_runner)
