"""The question-answering family's declaration (finetune/family.py): SQuAD, MRQA, and
users' tasks (each read from its task file)."""

import dataclasses

from finetune import layout
from finetune.errors import DataError
from finetune.family import Family, read_once, task_file_splits
from finetune.qa import data
from util import hparams

_TASK_KEYS = ("name", "train", "dev", "test", "unanswerable")


def load_task_file(path: str, spec: dict) -> data.QATask:
  """A user's question-answering task from its task file (docs/finetuning.md, "A
  question-answering task of your own")."""
  files = task_file_splits(path, spec, _TASK_KEYS)
  unanswerable = spec.get("unanswerable")
  if unanswerable is None:
    unanswerable = any(read_once(data.has_unanswerable,
                                 layout.own_file(files, split, spec["name"]))
                       for split in ("train", "dev") if split in files)
  elif not isinstance(unanswerable, bool):
    raise DataError(f'{path}: "unanswerable" must be true or false, got {unanswerable!r}')
  return data.QATask(
      name=spec["name"], folders=(), file_format="squad", v2=unanswerable,
      eval_splits=("dev",) if "dev" in files else (),
      test_splits=("test",) if "test" in files else (), files=files)


@dataclasses.dataclass(frozen=True)
class QASettings:
  """The config fields of question answering, the original's."""
  max_query_length: int = hparams.field(
      64, at_least=1, help="Word-pieces of the question kept.")
  doc_stride: int = hparams.field(
      128, at_least=1,
      help="Step, in word-pieces, between the windows of a long context.")
  n_best_size: int = hparams.field(
      20, at_least=1, resumable=True,
      help="Candidate answers kept per question (the n-best file).")
  max_answer_length: int = hparams.field(
      30, at_least=1, resumable=True, help="Longest answer, in word-pieces.")
  answerable_classifier: bool = hparams.field(
      True, help="A head that says whether the question has an answer (SQuAD 2.0-style "
                 "tasks).")
  answerable_uses_start_logits: bool = hparams.field(
      True, help="The answerable head reads the start logits too.")
  answerable_weight: float = hparams.field(
      0.5, at_least=0, help="Weight of the answerable head's loss.")
  joint_prediction: bool = hparams.field(
      True, help="The end is predicted given the start, with a beam (the original's "
                 "joint head).")
  beam_size: int = hparams.field(
      20, at_least=1, resumable=True,
      help="Starts and ends the joint head's beam keeps.")
  qa_na_threshold: float = hparams.field(
      -2.75, resumable=True, help="No answer when the null odds are above this.")


def _runner():
  from finetune.qa.model import QARunner  # pylint: disable=g-import-not-at-top
  return QARunner


FAMILY = Family(name="qa", task_type=data.QATask, tasks=data.QA_TASKS,
                split_file=data.split_file, read_file=data.read_file,
                read_tfds=data.read_tfds, runner=_runner, settings=QASettings,
                load_task_file=load_task_file)
