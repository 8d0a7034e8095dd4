"""A fine-tuned model directory, loaded for the writers: its Keras model, task, runner
(with the run's own settings) and vocabulary."""

import dataclasses
import os
from typing import Dict

import tensorflow as tf

from data_prep import normalization
from data_prep.tokenizer import Tokenizer
from data_prep.vocab import load_vocab
from finetune import tasks as task_registry
from finetune.config import FinetuningConfig
from finetune.family import Family
from finetune.modeling import FinetuningModel
from finetune.runner import TaskRunner
from model.config import ModelConfig
from model.weights import CheckpointError, huggingface, original
from runs.checkpoints import newest_readable, restore_weights
from runs.model_files import FINETUNING_RECORD, PRETRAINING_RECORD
from runs.record import read_record, recorded_vocab

# The variable every TensorFlow 2 object-graph checkpoint holds (a training run's).
OBJECT_GRAPH = "_CHECKPOINTABLE_OBJECT_GRAPH"


@dataclasses.dataclass
class Finetuned:
  """A fine-tuned model directory, loaded: its Keras model and what it was trained with."""
  folder: str
  model: FinetuningModel
  task: object
  family: Family
  runner: TaskRunner
  sizes: ModelConfig
  settings: Dict[str, object]
  vocab_file: str  # the vocabulary its training read

  @property
  def max_seq_length(self) -> int:
    return self.settings["max_seq_length"]

  @property
  def normalization(self) -> normalization.Normalization:
    """The text's normalisation, as the run recorded it."""
    return normalization.from_fields(self.settings)


def load_finetuned(folder: str, note=print) -> Finetuned:
  """The fine-tuned model of a trial directory of one task, its weights all read from
  its newest checkpoint that reads whole. A lost or empty record is rebuilt from the
  copy its checkpoints carry, said through `note`."""
  if not os.path.isfile(os.path.join(folder, FINETUNING_RECORD)):
    pretrained = ("a pre-training model dir"
                  if os.path.isfile(os.path.join(folder, PRETRAINING_RECORD))
                  else _pretrained_weights(folder))
    if pretrained:
      raise ValueError(f"{folder} is {pretrained}, not a fine-tuned model; fine-tune it "
                       f"first (python run_finetuning.py --task TASK --init-checkpoint "
                       f"{folder}) and give the fine-tuned trial's dir (<model_dir>_1)")
  saved = read_record(folder, FINETUNING_RECORD, note=note)
  if saved is None:
    trial = f"{folder.rstrip(os.sep)}_1"
    hint = (f"; did you mean {trial}?" if os.path.isfile(os.path.join(trial, FINETUNING_RECORD))
            else "; give a trial dir of run_finetuning.py (<model_dir>_<trial>)")
    raise ValueError(f"{folder} is not a fine-tuned model dir (no {FINETUNING_RECORD})"
                     + hint)
  settings, sizes = saved["finetuning"], ModelConfig(**saved["model"])
  names = settings["task_names"]
  if len(names) != 1:
    raise ValueError(f"{folder}: fine-tuned on {','.join(names)}; the exports take one "
                     "task's model (fine-tune each task on its own to export it)")
  task = task_registry.get_task(names[0])
  latest = newest_readable(folder, note)
  if not latest:
    raise ValueError(f"{folder}: holds {FINETUNING_RECORD} but no checkpoint")
  vocab_file = recorded_vocab(folder, saved)
  if not os.path.isfile(vocab_file):
    raise ValueError(f"{os.path.join(folder, FINETUNING_RECORD)}: the vocabulary it names, "
                     f"{vocab_file or '(none)'}, does not exist; put the vocab.txt the model "
                     f"was trained with at {os.path.join(folder, 'vocab.txt')}")
  # The run's config as it trained (its runner reads its family's fields from it).
  config = FinetuningConfig.from_record(settings)
  runner = task_registry.runner_for(task, config, Tokenizer(
      load_vocab(vocab_file), *normalization.from_fields(settings)))
  model = FinetuningModel(sizes, {runner.head_name: runner.make_head(sizes)})
  # One batch of the run's length builds every variable (the QA head's beam needs the
  # length; the tagging head reads word_positions).
  ones = tf.ones([1, settings["max_seq_length"]], tf.int32)
  model.build_variables({"input_ids": ones, "input_mask": ones, "segment_ids": 0 * ones,
                         "word_positions": 0 * ones})
  restore_weights(model, latest)
  return Finetuned(folder, model, task, task_registry.family_of(task), runner, sizes,
                   settings, vocab_file)


def _pretrained_weights(folder: str) -> str:
  """What pre-trained weights `folder` holds (a pre-training export, a release, a Hugging
  Face directory), or "" (a fine-tuned trial's checkpoints are TensorFlow 2's object
  graph, whose record read_record looks for)."""
  try:
    if huggingface.locate(folder):
      return "a Hugging Face ELECTRA directory (pre-trained weights)"
    prefix = original.locate(folder)
    names = {name for name, _ in tf.train.list_variables(prefix)} if prefix else set()
  except (CheckpointError, tf.errors.OpError, ValueError):
    return ""
  if names and OBJECT_GRAPH not in names:
    return ("a pre-training export (pre-trained weights in the original checkpoint "
            "format)")
  return ""
