"""run_pretraining.py's model dirs as a weight format: the newest training checkpoint
that reads whole.

A run's checkpoint is TensorFlow 2's object graph of its whole model; it is read into a
pair built at the sizes the run recorded, then handed on under the original names, so
every check and mapping of original.py applies. model/weights/formats.py asks it once
this module is imported: open weights through `open_weights` here.
"""

import os
import sys
from typing import Dict, List, Optional

import numpy as np
import tensorflow as tf

from model.config import ModelConfig
from model.electra import ElectraPair
from model.weights import CheckpointError, formats
from model.weights.formats import open_weights  # pylint: disable=unused-import
from model.weights.original import Mapping, assign, check_whole, original_variables
from runs.checkpoints import newest_readable
from runs.model_files import FINETUNING_RECORD, PRETRAINING_RECORD
from runs.record import read_record
from util import cli

# The run records every size: none is inferred.
INFERRED = ()
TRAINED_PART = "trained_part"  # the record's field: what the run's objective trains


def locate(path: str) -> Optional[str]:
  """The checkpoint prefix when `path` is a pre-training model dir (its newest training
  checkpoint that reads whole) or one of its training checkpoints; None for anything
  else. A fine-tuned model dir, where a pre-trained one is expected, is refused."""
  folder = path if os.path.isdir(path) else os.path.dirname(path)
  if os.path.isfile(os.path.join(folder, FINETUNING_RECORD)):
    raise CheckpointError(
        f"{path}: a fine-tuned model (its folder holds {FINETUNING_RECORD}); "
        "expected a pre-trained one: run_pretraining.py's model dir or its export/, a "
        "released ELECTRA checkpoint, or a Hugging Face ELECTRA directory")
  if not os.path.isfile(os.path.join(folder, PRETRAINING_RECORD)):
    try:  # lost: a run dir still when its checkpoints carry the record
      if read_record(folder, PRETRAINING_RECORD) is None:
        return None
    except CheckpointError:  # other checkpoints: original.py words what they are
      return None
  if not os.path.isdir(path):
    return path if tf.io.gfile.exists(path + ".index") else None
  prefix = newest_readable(folder, note=lambda line: print(line, flush=True))
  if prefix is None:
    raise CheckpointError(f"{path}: a pre-training model dir without a checkpoint yet; "
                          "train it first (run_pretraining.py saves every "
                          "save_checkpoints_steps)")
  return prefix


def _record(prefix: str) -> Dict:
  """The run's record (rebuilt from its checkpoints' copy if it was lost or emptied)."""
  return read_record(os.path.dirname(prefix), PRETRAINING_RECORD)


def part_held(prefix: str) -> str:
  """What the run trained, as its objective recorded it (pretrain/objectives/:
  exported_part): "pair", or "discriminator" / "generator" alone."""
  return _record(prefix)[TRAINED_PART]


def saved_model_config(prefix: str) -> ModelConfig:
  """The sizes the run recorded, whole."""
  return ModelConfig.from_dict(_record(prefix)["signature"]["model"])


def model_config(prefix: str, part: str = "pair") -> ModelConfig:
  del part  # the run's sizes hold for each of its parts
  return saved_model_config(prefix)


def vocab_files(prefix: str) -> List[str]:
  """The vocabulary the run was trained with."""
  vocab = _record(prefix).get("config", {}).get("vocab_file", "")
  return [vocab] if vocab else []


def load(mapping: Mapping, prefix: str, what: str):
  """Reads `what` into a pair built at the run's sizes and assigns the mapping from its
  variables, by their original names."""
  folder, signature = os.path.dirname(prefix), _record(prefix)["signature"]
  held = part_held(prefix)
  if held != "pair" and what != held:
    raise CheckpointError(f"{folder}: its run trained the {held} only (objective "
                          f"{'Electric' if held == 'discriminator' else 'masked LM'}); "
                          f"cannot load the {what}")
  check_whole(prefix, "copy it again, or give the run dir (its newest whole checkpoint)")
  pair = ElectraPair(ModelConfig.from_dict(signature["model"])).build_variables()
  parts = {"discriminator": ("discriminator", "discriminator_head"),
           "generator": ("generator", "generator_head")}
  wanted = parts.get(held, parts["discriminator"] + parts["generator"])
  holder = tf.train.Checkpoint(model=tf.train.Checkpoint(electra=tf.train.Checkpoint(
      **{name: getattr(pair, name) for name in wanted})))
  try:
    holder.restore(prefix).assert_existing_objects_matched().expect_partial()
  except (AssertionError, tf.errors.OpError, ValueError, IndexError) as e:
    raise CheckpointError(f"{prefix}: not a checkpoint of the model its run dir "
                          f"records ({cli.first_line(e, limit=200)})") from None
  values = {name: np.reshape(variable.numpy(), shape)
            for name, variable, shape in original_variables(pair, held)}
  assign(mapping, {name: value.shape for name, value in values.items()},
         values.__getitem__, prefix, what)


# model/ may not import this room: it learns of the format from here (before original.py,
# which would take a run's checkpoint for a bare TensorFlow 2 one).
formats.register(sys.modules[__name__])
