"""A run directory's files that the training loop and the weight reader share.

Each phase writes its record (run_pretraining.py's, run_finetuning.py's) and its
training checkpoints (ckpt-<step>, TensorFlow 2's object graph) in its model dir. A
checkpoint may not read whole (a full disk, a copy cut short), and the state file that
lists them (`checkpoint`) may be lost: both the loop, resuming, and run_dir.py, reading
a run's weights, take the newest one that reads, found on disk when the list is gone.
Every checkpoint also carries a copy of the record (RECORD_KEY), so a record that is
lost or emptied is rebuilt from the newest readable checkpoint, exactly as it was when
that checkpoint was saved; a run whose checkpoints carry none is refused, never
resumed under settings nobody knows.
"""

import glob
import json
import os
import re
from typing import Callable, Dict, List, Optional

import tensorflow as tf

# The records' names and shapes live beside CheckpointError (read without TensorFlow too).
from model.weights import (FINETUNING_RECORD, PRETRAINING_RECORD,  # pylint: disable=unused-import
                           CheckpointError, check_record_shape)
from util import cli, files

CHECKPOINT_NAME = "ckpt"
# A fine-tuning run's copy of the vocabulary it read, in its model dir, named by its
# record's RUN_VOCAB_KEY: the configured vocab_file may never have existed (the start's
# own vocab.txt was read) and a start may move; the copy keeps a finished run whole.
RUN_VOCAB = "vocab.txt"
RUN_VOCAB_KEY = "vocab"
# The checkpoint's attribute holding {"file": the record's name, "record": its contents}.
RECORD_KEY = "run_record"
_RECORD_TENSOR = f"{RECORD_KEY}/.ATTRIBUTES/VARIABLE_VALUE"


def carried_record(name: str, record: Dict) -> str:
  """The text a checkpoint carries for the record `name` holding `record`."""
  return json.dumps({"file": name, "record": record}, sort_keys=True)


def keep_vocab(model_dir: str, vocab_file: str) -> Dict[str, str]:
  """Copies the vocabulary a run read into its model dir (atomically); the record's
  field naming the copy."""
  with open(vocab_file, "rb") as source, \
      files.atomic_write(os.path.join(model_dir, RUN_VOCAB), "wb") as copy:
    copy.write(source.read())
  return {RUN_VOCAB_KEY: RUN_VOCAB}


def recorded_vocab(model_dir: str, record: Dict) -> str:
  """The vocab.txt a fine-tuning run read: the copy in its model dir that its record
  names, else (a record written before runs kept one) its settings' vocab_file."""
  if record.get(RUN_VOCAB_KEY):
    return os.path.join(model_dir, record[RUN_VOCAB_KEY])
  return (record.get("finetuning") or {}).get("vocab_file", "")


def read_record(model_dir: str, name: str, note: Callable[[str], None]
                ) -> Optional[Dict]:
  """The run's record <model_dir>/<name>; None for a model dir without one and without
  checkpoints. A record of another shape (not the run's) is refused (CheckpointError),
  never rewritten. A record that is missing, empty or unreadable while checkpoints are on
  disk is rebuilt from the copy the newest readable one carries (saying so through
  `note`), or refused (CheckpointError) when they carry none."""
  path = os.path.join(model_dir, name)
  problem = "is missing"
  if os.path.exists(path):
    try:
      with open(path, encoding="utf-8") as f:
        record = json.load(f)
    except (OSError, ValueError) as e:
      record, problem = None, f"cannot be read ({e})"
    else:
      if record:
        return check_record_shape(path, record)
      problem = "is empty"
  # Silent: the loop says what it skips or finds when it resumes.
  paths = kept_checkpoints(model_dir, lambda _: None)
  if not paths:
    if problem.startswith("cannot"):
      raise CheckpointError(f"{path}: the run's record {problem}")
    return None
  newest = first_readable(list(reversed(paths)), model_dir, lambda _: None)
  reader = tf.train.load_checkpoint(newest)
  carried = (json.loads(reader.get_tensor(_RECORD_TENSOR) or b"{}")
             if reader.has_tensor(_RECORD_TENSOR) else {})
  if carried.get("file") != name or not carried.get("record"):
    raise CheckpointError(
        f"{path}: the run's record {problem}, and its checkpoints "
        f"({os.path.basename(newest)} and older) carry no copy of it (saved before "
        "checkpoints did), so the settings they were trained with are unknown: put the "
        "file back, or use another model_dir, or set \"overwrite_model_dir\": true to "
        "delete the run and start over")
  with files.atomic_write(path) as f:
    json.dump(carried["record"], f, indent=2, sort_keys=True)
  note(f"note: {path}, the run's record, {problem}; rebuilt it from the copy "
       f"{os.path.basename(newest)} carries")
  return carried["record"]


def first_readable(newest_first: List[str], model_dir: str,
                   note: Callable[[str], None]) -> str:
  """The first of these checkpoints that reads whole, saying through `note` why each
  one before it was skipped; a CheckpointError naming the first's file if none does."""
  first_problem = None
  for path in newest_first:
    problem = unreadable_checkpoint(path)
    if problem is None:
      return path
    first_problem = first_problem or problem
    note(f"note: skipping checkpoint {os.path.basename(path)}, which cannot be read "
         f"({problem})")
  raise CheckpointError(f"{first_problem}; no checkpoint in {model_dir} reads whole: "
                        f"delete {model_dir} to start the run over")


def newest_readable(model_dir: str, note: Callable[[str], None]) -> Optional[str]:
  """The newest checkpoint of a model dir that reads whole (first_readable); None when
  the model dir has none."""
  paths = kept_checkpoints(model_dir, note)
  return first_readable(list(reversed(paths)), model_dir, note) if paths else None


_CHECKPOINT_FILE = re.compile(rf"^{CHECKPOINT_NAME}-(\d+)\.(index|data-\d+-of-\d+)$")


def kept_checkpoints(model_dir: str, note: Callable[[str], None],
                     repair: bool = False) -> List[str]:
  """The model dir's checkpoint prefixes, oldest first, as its state file (`checkpoint`)
  lists them. When that file is gone (deleted, a copy that missed it) but checkpoints
  are on disk, they are found by their file names, saying so through `note`, and with
  `repair` listed in a new state file, so that the run resumes from them (and later
  saves keep managing them) instead of starting over."""
  state = tf.train.get_checkpoint_state(model_dir)
  if state and state.all_model_checkpoint_paths:
    return list(state.all_model_checkpoint_paths)
  listed = tf.io.gfile.listdir(model_dir) if tf.io.gfile.isdir(model_dir) else []
  # Files only: a directory under a checkpoint file's name is in the way of a save, not
  # a checkpoint (the save then fails, naming it).
  steps = sorted({int(m.group(1)) for m in map(_CHECKPOINT_FILE.match, listed)
                  if m and not tf.io.gfile.isdir(os.path.join(model_dir, m.group(0)))})
  if not steps:
    return []
  found = [os.path.join(model_dir, f"{CHECKPOINT_NAME}-{step}") for step in steps]
  names = [os.path.basename(p) for p in found]
  shown = ", ".join(names) if len(names) <= 4 else (
      f"{names[0]}, {names[1]}, ..., {names[-1]} ({len(names)})")
  note(f"note: {os.path.join(model_dir, 'checkpoint')}, the list of the run's "
       f"checkpoints, is missing; found {shown} on disk")
  whole = [p for p in found if tf.io.gfile.exists(p + ".index")]
  if repair and whole:
    # With their times, as CheckpointManager writes them: without, it would treat them
    # as preserved for good and never delete them past keep_checkpoint_max.
    times = [tf.io.gfile.stat(p + ".index").mtime_nsec / 1e9 for p in whole]
    with files.atomic_write(os.path.join(model_dir, "checkpoint")) as f:
      f.write(f'model_checkpoint_path: "{os.path.basename(whole[-1])}"\n')
      f.writelines(f'all_model_checkpoint_paths: "{os.path.basename(p)}"\n'
                   for p in whole)
      f.writelines(f"all_model_checkpoint_timestamps: {t!r}\n" for t in times)
      f.write(f"last_preserved_timestamp: {min(times) - 1!r}\n")
  return found


def check_whole(prefix: str, remedy: str):
  """Refuses (CheckpointError, with `remedy`) a checkpoint that does not read whole,
  before any of it is used."""
  problem = unreadable_checkpoint(prefix)
  if problem:
    raise CheckpointError(f"{problem}; the checkpoint is cut short or damaged: {remedy}")


def unreadable_checkpoint(prefix: str) -> Optional[str]:
  """None when every tensor of the checkpoint at `prefix` reads; else "<file>: <why>"."""
  try:
    reader = tf.train.load_checkpoint(prefix)
  except (tf.errors.OpError, ValueError, IndexError) as e:
    return f"{prefix}.index: {cli.first_line(e)}"
  try:
    for name in reader.get_variable_to_shape_map():
      reader.get_tensor(name)
  except (tf.errors.OpError, ValueError, IndexError) as e:
    shards = sorted(glob.glob(glob.escape(prefix) + ".data-*"))
    shown = shards[0] if len(shards) == 1 else prefix + ".data-*"
    return f"{shown}: {cli.first_line(e)}"
  return None
