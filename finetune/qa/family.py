"""The question-answering family's declaration (finetune/family.py): SQuAD and MRQA."""

import dataclasses

from finetune.family import Family
from finetune.qa import data
from util import hparams


@dataclasses.dataclass(frozen=True)
class QASettings:
  """The config fields of question answering, the original's."""
  max_query_length: int = hparams.field(64, at_least=1)
  doc_stride: int = hparams.field(128, at_least=1)
  n_best_size: int = hparams.field(20, at_least=1, resumable=True)
  max_answer_length: int = hparams.field(30, at_least=1, resumable=True)
  answerable_classifier: bool = True
  answerable_uses_start_logits: bool = True
  answerable_weight: float = hparams.field(0.5, at_least=0)
  joint_prediction: bool = True
  beam_size: int = hparams.field(20, at_least=1, resumable=True)
  qa_na_threshold: float = hparams.field(-2.75, resumable=True)


def _runner():
  from finetune.qa.model import QARunner  # pylint: disable=g-import-not-at-top
  return QARunner


FAMILY = Family(name="qa", task_type=data.QATask, tasks=data.QA_TASKS,
                read_examples=data.read_examples, runner=_runner, settings=QASettings)
