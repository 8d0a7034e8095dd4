"""Pre-trained weights in every format the project reads, one module per format.

- original.py: the original release's TF1 checkpoints, by variable name (the mapping
  table every format loads through, and the writer of that format);
- huggingface.py: transformers' ELECTRA directories (and the names, config.json and
  tokenizer files that tools/export_hf.py writes);
- run_dir.py: run_pretraining.py's model dirs (their newest training checkpoint, read
  at the run's recorded sizes);
- run_files.py: beside it, a run dir's files that the training loop shares: the records
  each phase writes there and which training checkpoints read whole.

formats.py opens any path by asking each format, in its list, whether the path is its
own; a new format is one module answering the same questions and one line in that list.
by_name.py turns a release's name or a Hugging Face id into the local path it fetched.
"""

import json
import os
from typing import Dict

from util.cli import listed

# The record each phase writes in its model dir (it tells a pre-training model dir from
# a fine-tuned one); run_files.py reads them.
PRETRAINING_RECORD = "pretrain_config.json"
FINETUNING_RECORD = "finetuning_config.json"


class CheckpointError(ValueError):
  """Weights that are missing, unreadable, of another model, or do not fit the one
  being loaded (any format)."""


def read_json(path: str) -> Dict:
  """A JSON file beside some weights (a config, a run's record)."""
  try:
    with open(path, encoding="utf-8") as f:
      return json.load(f)
  except (OSError, ValueError) as e:
    raise CheckpointError(f"{path}: cannot read ({e})") from None


# What each record holds, to tell a run's own record from another JSON file in its
# place (one taken as read would be rewritten, the run's settings and history lost):
# {name: (the command writing it, the objects it must hold)}.
RECORD_SHAPES = {PRETRAINING_RECORD: ("run_pretraining.py", ("signature", "config")),
                 FINETUNING_RECORD: ("run_finetuning.py", ("finetuning", "model"))}


def check_record_shape(path: str, record) -> Dict:
  """`record`, read from `path`, if it has its file's shape (RECORD_SHAPES); else a
  CheckpointError naming the file, what it holds and what was expected."""
  writer, keys = RECORD_SHAPES.get(os.path.basename(path), ("", ()))
  if isinstance(record, dict) and all(isinstance(record.get(k), dict) for k in keys):
    return record
  kinds = {list: "array", str: "string", int: "number", float: "number", bool: "boolean"}
  held = ("an empty JSON object" if record == {} else
          f"a JSON object with keys {listed(map(repr, record))}"
          if isinstance(record, dict) else f"a JSON {kinds.get(type(record), 'value')}")
  raise CheckpointError(
      f"{path}: not the run's record (holds {held}; expected the JSON object "
      f"{writer or 'the run'} writes, with {' and '.join(repr(k) for k in keys)} "
      "objects); "
      "put the run's own record back, or use another model_dir, or set "
      "\"overwrite_model_dir\": true to delete the run and start over")


def read_run_record(path: str) -> Dict:
  """A run's record read as it is (for a tool that reads one without TensorFlow): one
  line (CheckpointError) when it cannot be read or is not a run's record, naming the
  model dir when that or its record is missing."""
  model_dir, name = os.path.split(path)
  writer = RECORD_SHAPES.get(name, ("the run",))[0]
  if not os.path.isdir(model_dir or "."):
    problem = "not a folder" if os.path.exists(model_dir) else "no such model dir"
    raise CheckpointError(f"{model_dir}: {problem}; expected the model dir of a run of "
                          f"{writer}, which holds its {name}")
  if not os.path.exists(path):
    raise CheckpointError(f"{model_dir} holds no run ({name}, which {writer} writes)")
  return check_record_shape(path, read_json(path))
