"""A run's record in its model dir, read, written and checked: its signature (what
fixes its trained weights; a later run resumes only under the same), its config and the
history of the settings a resumed run changed. A record lost or emptied is rebuilt from
the copy its newest readable checkpoint carries; a run whose checkpoints carry none is
refused, never resumed under settings nobody knows.
"""

import contextlib
import fnmatch
import glob
import json
import os
import shutil
from typing import Callable, Dict, List, Optional, Sequence

from model.weights import CheckpointError, read_json
from runs import model_files
from runs.model_files import FINETUNING_RECORD, PRETRAINING_RECORD, RUN_VOCAB
from util import cli, hparams

# runs/checkpoints.py (TensorFlow) is imported where a record meets its checkpoints
# only: the run tools read a record without TensorFlow (read_run_record).

# The record's field naming a fine-tuning run's copy of the vocabulary it read
# (RUN_VOCAB): the configured vocab_file may never have existed (the start's own
# vocab.txt was read) and a start may move; the copy keeps a finished run whole.
RUN_VOCAB_KEY = "vocab"


def keep_vocab(model_dir: str, vocab_file: str) -> Dict[str, str]:
  """Copies the vocabulary a run read into its model dir (atomically); the record's
  field naming the copy."""
  with open(vocab_file, "rb") as source:
    model_files.write(model_dir, RUN_VOCAB, source.read())
  return {RUN_VOCAB_KEY: RUN_VOCAB}


def recorded_vocab(model_dir: str, record: Dict) -> str:
  """The vocab.txt a fine-tuning run read: the copy in its model dir that its record
  names."""
  kept = record.get(RUN_VOCAB_KEY)
  return os.path.join(model_dir, kept) if kept else ""


def read_record(model_dir: str, name: str,
                note: Callable[[str], None] = lambda line: print(line, flush=True)
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
  from runs.checkpoints import carried_record  # pylint: disable=import-outside-toplevel
  # Silent: the loop says what it skips or finds when it resumes.
  newest, carried = carried_record(model_dir, name)
  if newest is None:
    if problem.startswith("cannot"):
      raise CheckpointError(f"{path}: the run's record {problem}")
    return None
  if carried is None:
    raise CheckpointError(
        f"{path}: the run's record {problem}, and its checkpoints "
        f"({os.path.basename(newest)} and older) carry no copy of it (saved before "
        "checkpoints did), so the settings they were trained with are unknown: put the "
        "file back, or use another model_dir, or set \"overwrite_model_dir\": true to "
        "delete the run and start over")
  model_files.write(model_dir, name, carried)
  note(f"note: {path}, the run's record, {problem}; rebuilt it from the copy "
       f"{os.path.basename(newest)} carries")
  return carried


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
          f"a JSON object with keys {cli.listed(map(repr, record))}"
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


def check_run_folder(model_dir: str, data_dir: str, deletes: str = ""):
  """Refuses a model dir that is the data dir or its models folder, or a folder holding
  either: a run's folder is its own, beside the inputs and the other runs. `deletes`:
  the setting by which this run may delete the run in it, refused through a link (it
  would delete the run of the folder linked to)."""
  model_dir_real = os.path.realpath(model_dir)
  if deletes and os.path.islink(model_dir):
    raise hparams.HParamsError(
        f"the model dir {model_dir} is a link to {model_dir_real}, whose run {deletes} "
        "would delete: give that folder itself as the model dir, or another --model-name "
        "or model_dir")
  for what, folder in (("the data dir", data_dir),
                       ("the data dir's models folder", os.path.join(data_dir, "models"))):
    real = os.path.realpath(folder)
    if os.path.commonpath([real, model_dir_real]) == model_dir_real:
      held = "is" if real == model_dir_real else "holds"
      raise hparams.HParamsError(
          f"the model dir {model_dir} {held} {what} ({folder}); a run's model dir is a "
          "folder of its own: give another --model-name or model_dir")


def check_resume(model_dir: str, config_name: str, signature: Dict, overwrite: bool,
                 evaluating: bool = False, written: Sequence[str] = (),
                 beside: Sequence[str] = ()):
  """Refuses to resume a model dir whose run had another `signature` (what fixes the
  trained weights; nested dicts compare field by field), unless `overwrite`: then
  deletes that run so this one starts over. `written`: the glob patterns the run writes
  beside its record; `beside`: what other runs write there, which stays. A model dir
  without a run that holds anything else is someone's folder, refused.
  `evaluating`: this run only reads the weights, so `signature` holds just what gives
  them their meaning, and a difference is refused whatever `overwrite` says (deleting
  the run would leave nothing to evaluate)."""
  unknown = False
  try:
    previous = read_record(model_dir, config_name)
  except CheckpointError:  # a run trained under unknown settings
    if not overwrite or evaluating:
      raise
    previous, unknown = None, True
  if previous is None:  # a new run's folder, someone's, or a run of unknown settings
    others = unwritten(model_dir, [config_name, *written, *beside])
    if others:
      raise hparams.HParamsError(
          f"{model_dir} holds no run ({config_name}), and what no run writes "
          f"({cli.listed(others)}); a run's model dir is a folder of its own: give "
          "another --model-name or model_dir")
    if unknown:
      start_over(model_dir, config_name, written)
    return
  if "signature" not in previous:  # unsigned: nothing to compare
    return
  new, old = json.loads(json.dumps(signature)), previous["signature"]
  if evaluating:
    old = {name: value for name, value in old.items() if name in new}
  changed = _changes(old, new)
  if not changed:
    return
  shown = "; ".join(changed[:4]) + (f"; and {len(changed) - 4} more"
                                    if len(changed) > 4 else "")
  if evaluating:
    raise hparams.HParamsError(
        f"{model_dir} holds a run of another model ({shown}); evaluate it with the "
        f"run's own values (its {config_name}), or use another model_dir")
  if not overwrite:
    raise hparams.HParamsError(
        f"{model_dir} holds a run with a different config ({shown}); use another "
        "model_dir, or set \"overwrite_model_dir\": true to delete that run, checkpoints "
        "included, and start over")
  start_over(model_dir, config_name, written)


def start_over(model_dir: str, config_name: str, written: Sequence[str]):
  print(f"overwrite_model_dir: deleting the previous run in {model_dir}", flush=True)
  kept = delete_run(model_dir, config_name, written)
  if kept:
    print(f"note: kept what no run writes in {model_dir}: {cli.listed(kept)}",
          flush=True)


def unwritten(model_dir: str, patterns: Sequence[str]) -> List[str]:
  """The entries of model_dir that none of `patterns` names (nor leads into), hidden ones
  (writes' temporaries) aside."""
  tops = [pattern.split(os.sep)[0] for pattern in patterns]
  names = os.listdir(model_dir) if os.path.isdir(model_dir) else []
  return [name for name in names if not name.startswith(".") and
          not any(fnmatch.fnmatch(name, top) for top in tops)]


def delete_run(model_dir: str, config_name: str, written: Sequence[str]) -> List[str]:
  """Deletes what a run writes in model_dir (its record and `written`, glob patterns
  relative to it) and the folders that leaves empty, model_dir included; returns the
  entries left, which no run wrote."""
  patterns = [config_name, *written]
  for pattern in patterns:
    for path in glob.glob(os.path.join(glob.escape(model_dir), pattern)):
      if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
      else:
        os.remove(path)
  for folder in {os.path.dirname(p) for p in patterns if os.sep in p}:
    with contextlib.suppress(OSError):  # not empty: something else is there
      os.rmdir(os.path.join(model_dir, folder))
  kept = os.listdir(model_dir)
  if not kept:
    os.rmdir(model_dir)
  return kept


def _changes(old: Dict, new: Dict) -> list:
  """"name: old -> new" per differing field; nested dicts' fields after the top level's."""
  names = sorted(set(old) | set(new))
  nested = [k for k in names
            if isinstance(old.get(k), dict) or isinstance(new.get(k), dict)]
  changed = [f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in names
             if k not in nested and old.get(k) != new.get(k)]
  for name in nested:
    changed += _changes(old.get(name) or {}, new.get(name) or {})
  return changed


def settings_history(model_dir: str, config_name: str, settings: Dict,
                     step: int) -> List[Dict]:
  """The record's history of the settings a resumed run may change, with `settings`
  holding from `step` on: [{"from_step": 0, every setting}, {"from_step": s, the ones
  that changed at s}, ...]."""
  settings = json.loads(json.dumps(settings))
  history = (read_record(model_dir, config_name) or {}).get("history")
  if not history:
    return [{"from_step": step, **settings}]
  held = {}
  for entry in history:
    held.update(entry)
  changed = {k: v for k, v in settings.items() if k not in held or held[k] != v}
  if changed:
    if history[-1]["from_step"] == step:  # changed again before a step was trained
      history[-1].update(changed)
    else:
      history.append({"from_step": step, **changed})
  return history


@contextlib.contextmanager
def kept_once_trained(model_dir: str, config_name: str):
  """For a run's block that writes its record and trains: when the block fails before
  the model dir holds a checkpoint, a record written where there was none is removed,
  so the corrected run is not refused as a run with a different config."""
  from runs.checkpoints import kept_checkpoints  # pylint: disable=import-outside-toplevel
  path = os.path.join(model_dir, config_name)
  fresh = not os.path.exists(path)
  try:
    yield
  except BaseException:
    if (fresh and os.path.exists(path)
        and not kept_checkpoints(model_dir, lambda _: None)):
      os.remove(path)
    raise


def write_record(model_dir: str, config_name: str, signature: Dict, **contents):
  """<model_dir>/<config_name>: the run's signature (for check_resume) and `contents`."""
  model_files.write(model_dir, config_name, {"signature": signature, **contents})
