"""A run dir's training checkpoints: saved, listed, read whole, restored.

A checkpoint may not read whole (a full disk, a copy cut short), and the state file
that lists them (`checkpoint`) may be lost: the loop resuming and the weights' readers
(pretrained.py) both take the newest one that reads, found on disk when the list is
gone. Every checkpoint carries a copy of the record (RECORD_KEY), from which a record
lost or emptied is rebuilt (record.read_record).
"""

import contextlib
import glob
import json
import os
import re
import shutil
from typing import Callable, Dict, List, Optional, Tuple

import tensorflow as tf

from model.dropout import dropout_generators
from model.weights import CheckpointError
from model.weights.original import unreadable_checkpoint
from runs import model_files
from runs.model_files import CHECKPOINT_NAME, CHECKPOINT_STATE, DATA_STATE, WORKER_SCRATCH
from util import cli

# The checkpoint's attribute holding {"file": the record's name, "record": its contents}.
RECORD_KEY = "run_record"
_RECORD_TENSOR = f"{RECORD_KEY}/.ATTRIBUTES/VARIABLE_VALUE"
_CHECKPOINT_FILE = re.compile(rf"^{CHECKPOINT_NAME}-(\d+)\.(index|data-\d+-of-\d+)$")


def carried_record(model_dir: str, name: str) -> Tuple[Optional[str], Optional[Dict]]:
  """(the newest readable checkpoint, the record `name` it carries or None); (None,
  None) for a model dir without checkpoints."""
  newest = newest_readable(model_dir, lambda _: None)
  if newest is None:
    return None, None
  reader = tf.train.load_checkpoint(newest)
  carried = (json.loads(reader.get_tensor(_RECORD_TENSOR) or b"{}")
             if reader.has_tensor(_RECORD_TENSOR) else {})
  return newest, (carried["record"] if carried.get("file") == name else None) or None


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
  note(f"note: {os.path.join(model_dir, CHECKPOINT_STATE)}, the list of the run's "
       f"checkpoints, is missing; found {shown} on disk")
  whole = [p for p in found if tf.io.gfile.exists(p + ".index")]
  if repair and whole:
    # With their times, as CheckpointManager writes them: without, it would treat them
    # as preserved for good and never delete them past keep_checkpoint_max.
    times = [tf.io.gfile.stat(p + ".index").mtime_nsec / 1e9 for p in whole]
    model_files.write(model_dir, CHECKPOINT_STATE, "".join(
        [f'model_checkpoint_path: "{os.path.basename(whole[-1])}"\n',
         *(f'all_model_checkpoint_paths: "{os.path.basename(p)}"\n' for p in whole),
         *(f"all_model_checkpoint_timestamps: {t!r}\n" for t in times),
         f"last_preserved_timestamp: {min(times) - 1!r}\n"]))
  return found


class RunCheckpoints:
  """A training loop's checkpoints in its model dir. On several workers every one must
  save (collective ops); only the chief's copy is kept, the others' go to scratch
  folders removed when the run ends."""

  def __init__(self, strategy, objects: Dict, model_dir: str, keep: int,
               record_name: str, worker: int):
    self.strategy, self.model_dir, self.keep = strategy, model_dir, keep
    self.record_name, self.worker, self.chief = record_name, worker, worker == 0
    self.objects = objects  # model, optimizer, step: what a checkpoint holds
    # Outside the strategy's scope: a string for the host, not a value to mirror.
    self._record = tf.Variable("", dtype=tf.string, trainable=False, name=RECORD_KEY)
    self._readable = (None, None)  # (newest checkpoint, the newest that reads whole)
    self._manager = self._data_manager = None

  def _new_manager(self) -> tf.train.CheckpointManager:
    # The dropout layers' random generators, created now so checkpoints hold them:
    # Keras makes them lazily and does not track them, so without this a resumed run
    # would drop different units than an uninterrupted one.
    with self.strategy.scope():
      generators = dropout_generators(self.objects["model"])
    carried = {RECORD_KEY: self._record} if self.record_name else {}
    checkpoint = tf.train.Checkpoint(dropout_generators=generators, **self.objects,
                                     **carried)
    directory = self.model_dir if self.chief else os.path.join(
        self.model_dir, WORKER_SCRATCH, str(self.worker))
    return tf.train.CheckpointManager(checkpoint, directory, max_to_keep=self.keep,
                                      checkpoint_name=CHECKPOINT_NAME)

  def _new_data_manager(self, iterator) -> tf.train.CheckpointManager:
    """Each worker's input position, saved beside the model at the same steps."""
    directory = os.path.join(self.model_dir, DATA_STATE, f"worker_{self.worker}")
    return tf.train.CheckpointManager(tf.train.Checkpoint(iterator=iterator), directory,
                                      max_to_keep=self.keep,
                                      checkpoint_name=CHECKPOINT_NAME)

  def latest(self) -> Optional[str]:
    """The newest of the model dir's checkpoints that reads whole (first_readable; None
    if it has none), a lost state file written again (kept_checkpoints)."""
    note = (lambda line: print(line, flush=True)) if self.chief else (lambda _: None)
    paths = kept_checkpoints(self.model_dir, note, repair=self.chief)
    if paths and self._readable[0] != paths[-1]:  # each new state is checked once
      self._readable = (paths[-1], first_readable(paths[::-1], self.model_dir, note))
    return self._readable[1] if paths else None

  def restore(self, path: Optional[str] = None) -> Optional[str]:
    """Restores the model, optimizer and step of the latest checkpoint (or of `path`);
    returns its path."""
    path = path or self.latest()
    if path:
      with _of_this_model(path):
        self._new_manager().checkpoint.restore(path).expect_partial()
    return path

  def resume(self, new_iterator: Callable, init_fn: Optional[Callable[[], None]],
             input_position: bool):
    """(the checkpoint restored or None, the iterator to train on): the latest
    checkpoint restored (else `init_fn()`), and with `input_position` the input where
    that checkpoint's step left it, else a new iterator (the data starts over)."""
    iterator = new_iterator()
    self.latest()  # first: a lost state file is rebuilt before the manager reads it
    self._manager = self._new_manager()
    self._data_manager = self._new_data_manager(iterator) if input_position else None
    restored = self.restore()
    if not restored and init_fn is not None:
      init_fn()
    if restored and input_position and not self._restore_input_position(restored):
      # A failed restore can leave the iterator half-restored (at its end).
      iterator = new_iterator()
      self._data_manager = self._new_data_manager(iterator)
    return restored, iterator

  def _restore_input_position(self, restored: str) -> bool:
    """Puts the input where the restored checkpoint's step left it (True), or says the
    data starts over (False: none saved, or a state that does not read whole, such as
    one naming files that moved)."""
    data_state = os.path.join(self._data_manager.directory,
                              f"{CHECKPOINT_NAME}-{int(self.objects['step'].numpy())}")
    problem = "none saved"
    if tf.io.gfile.exists(data_state + ".index"):
      try:  # read by restoring: an iterator's state is no tensor a reader can read
        self._data_manager.checkpoint.restore(data_state)
        problem = None
      except (tf.errors.OpError, ValueError, IndexError) as e:
        problem = f"{data_state}: {cli.first_line(e)}"
    if problem is not None and self.chief:
      print(f"note: no input position for {restored} ({problem}); the data starts over",
            flush=True)
    return problem is None

  def save(self, step: int) -> str:
    """The checkpoint of `step` (the record's copy, the input position, the rest);
    returns its path, named as the chief's copy on every worker."""
    if self.record_name:
      self._carry_record()
    if self._data_manager is not None:
      save_checkpoint(self._data_manager, step)
    return os.path.join(self.model_dir,
                        os.path.basename(save_checkpoint(self._manager, step)))

  def _carry_record(self):
    """The record as its file now says, into the checkpoint about to be saved (a file
    gone or unreadable meanwhile leaves the copy restored or carried last)."""
    try:
      with open(os.path.join(self.model_dir, self.record_name), encoding="utf-8") as f:
        record = json.load(f)
    except (OSError, ValueError):
      return
    if record and isinstance(record, dict):  # never carry a file that is not a record
      self._record.assign(json.dumps({"file": self.record_name, "record": record},
                                     sort_keys=True))

  def close(self):
    """A worker's scratch copies go: they were only needed for the collectives."""
    if not self.chief and self._manager is not None:
      shutil.rmtree(self._manager.directory, ignore_errors=True)


def restore_weights(model, path: str):
  """Every weight of a built `model` read from the training checkpoint `path` (the
  optimizer's slots and the loop's state left unread): the one restore of trained
  weights, for evaluating, exporting and serving them."""
  with _of_this_model(path):
    tf.train.Checkpoint(model=model).restore(path).assert_existing_objects_matched() \
        .expect_partial()


@contextlib.contextmanager
def _of_this_model(path: str):
  """A restore from `path` whose checkpoint is another model's: a CheckpointError."""
  try:
    yield
  except (ValueError, AssertionError) as e:  # "incompatible tensor with shape ...",
    raise CheckpointError(  # an object of the model the checkpoint lacks
        f"{path}: not a checkpoint of this config's model ({cli.first_line(e)}); "
        "give the run's own settings, or use another model_dir") from None


def save_checkpoint(manager: tf.train.CheckpointManager, step: int) -> str:
  """manager.save; a failed save (a full disk, a read-only dir) leaves no <prefix>_temp
  directory of half-written shards behind."""
  try:
    return manager.save(checkpoint_number=step)
  except BaseException:
    for path in glob.glob(os.path.join(glob.escape(manager.directory), "*_temp")):
      shutil.rmtree(path, ignore_errors=True)
    raise
