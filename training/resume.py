"""Whether a model dir's previous run may be resumed: its record, written and checked.

A run writes its record beside its checkpoints: what fixes its trained weights (its
signature), its whole config, and the history of the settings that may change when it
is resumed (from which step each value held). A later run on the same dir resumes only
when its signature is the same.
"""

import contextlib
import fnmatch
import glob
import json
import os
import shutil
from typing import Callable, Dict, List, Optional, Sequence

from model.weights import CheckpointError, run_files
from training.loop import LOOP_FILES
from util import cli, files, hparams

# Every message that suggests overwrite_model_dir says what it costs.
OVERWRITE_ADVICE = ("set \"overwrite_model_dir\": true to delete that run, checkpoints "
                    "included, and start over")


def read_record(model_dir: str, config_name: str) -> Optional[Dict]:
  """<model_dir>/<config_name> as written by write_run_config, rebuilt from the copy its
  checkpoints carry when lost (run_files.read_record); None if there is none."""
  return run_files.read_record(model_dir, config_name,
                               note=lambda line: print(line, flush=True))


def check_run_folder(model_dir: str, data_dir: str):
  """Refuses a model dir that is the data dir or its models folder, or a folder holding
  either: a run's folder is its own, beside the inputs and the other runs."""
  model_dir_real = os.path.realpath(model_dir)
  for what, folder in (("the data dir", data_dir),
                       ("the data dir's models folder", os.path.join(data_dir, "models"))):
    real = os.path.realpath(folder)
    if os.path.commonpath([real, model_dir_real]) == model_dir_real:
      held = "is" if real == model_dir_real else "holds"
      raise hparams.HParamsError(
          f"the model dir {model_dir} {held} {what} ({folder}); a run's model dir is a "
          "folder of its own: give another --model-name or model_dir")


def check_resume(model_dir: str, config_name: str, signature: Dict, overwrite: bool,
                 evaluating: bool = False,
                 renamed: Callable[[Dict], Dict] = lambda values: values,
                 written: Sequence[str] = (), beside: Sequence[str] = ()):
  """Refuses to resume a model dir whose run had another `signature` (what fixes the
  trained weights; a nested dict such as the model's sizes compares field by field)
  than this one, unless `overwrite`: then deletes that run (delete_run) so this one
  starts over. A field an older record did not sign is compared with its whole config
  ("config"), when it holds the field.

  `written`: what the phase writes in a model dir beside its record and the loop's
  files, as glob patterns relative to it; `beside`: what other runs write there, which
  stays (fine-tuning's outputs in a pre-trained model's folder). A model dir without a
  run that holds anything else is refused: it is someone's folder, not a run's.

  `evaluating`: this run only reads the trained weights, so `signature` holds just what
  gives them their meaning (sizes, vocabulary, objective); only those fields are
  compared, and a difference is refused whatever `overwrite` says (deleting the run
  would leave nothing to evaluate).

  `renamed`: an older record's signature or config in today's field names."""
  unknown = False
  try:
    previous = read_record(model_dir, config_name)
  except CheckpointError:  # a run trained under unknown settings
    if not overwrite or evaluating:
      raise
    previous, unknown = None, True
  if previous is None:  # a new run's folder, or someone's
    others = unwritten(model_dir, [*run_patterns(config_name, written), *beside])
    if others:
      raise hparams.HParamsError(
          f"{model_dir} holds no run ({config_name}), and what no run writes "
          f"({cli.listed(others)}); a run's model dir is a folder of its own: give "
          "another --model-name or model_dir")
  if unknown:
    start_over(model_dir, config_name, written)
    return
  if previous is None or "signature" not in previous:  # unsigned: nothing to compare
    return
  new = json.loads(json.dumps(signature))
  old = renamed(dict(previous["signature"]))
  recorded = renamed(previous.get("config") or {})
  for name, value in new.items():
    if name not in old:
      old[name] = recorded.get(name, value)
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
        f"model_dir, or {OVERWRITE_ADVICE}")
  start_over(model_dir, config_name, written)


def start_over(model_dir: str, config_name: str, written: Sequence[str]):
  print(f"overwrite_model_dir: deleting the previous run in {model_dir}", flush=True)
  kept = delete_run(model_dir, config_name, written)
  if kept:
    print(f"note: kept what no run writes in {model_dir}: {cli.listed(kept)}",
          flush=True)


def run_patterns(config_name: str, written: Sequence[str]) -> List[str]:
  """Everything a run writes in its model dir, as glob patterns relative to it: its
  record, the loop's files and the phase's own (`written`)."""
  return [config_name, *LOOP_FILES, *written]


def unwritten(model_dir: str, patterns: Sequence[str]) -> List[str]:
  """The entries of model_dir that none of `patterns` names (nor leads into), hidden ones
  (writes' temporaries) aside."""
  tops = [pattern.split(os.sep)[0] for pattern in patterns]
  names = os.listdir(model_dir) if os.path.isdir(model_dir) else []
  return [name for name in names if not name.startswith(".") and
          not any(fnmatch.fnmatch(name, top) for top in tops)]


def delete_run(model_dir: str, config_name: str, written: Sequence[str]) -> List[str]:
  """Deletes what a run writes in model_dir (run_patterns) and the folders that leaves
  empty, model_dir included; returns the entries left, which no run wrote."""
  patterns = run_patterns(config_name, written)
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
  that changed at s}, ...]. A record without a history starts it from its config."""
  settings = json.loads(json.dumps(settings))
  previous = read_record(model_dir, config_name) or {}
  history = previous.get("history")
  if history is None:
    recorded = previous.get("config")
    history = [{"from_step": 0, **{k: recorded[k] for k in settings if k in recorded}}
               ] if recorded else []
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
  path = os.path.join(model_dir, config_name)
  fresh = not os.path.exists(path)
  try:
    yield
  except BaseException:
    if (fresh and os.path.exists(path)
        and not run_files.kept_checkpoints(model_dir, lambda _: None)):
      os.remove(path)
    raise


def write_run_config(model_dir: str, config_name: str, signature: Dict, **contents):
  """<model_dir>/<config_name>: the run's signature (for check_resume) and `contents`."""
  with files.atomic_write(os.path.join(model_dir, config_name)) as f:
    json.dump({"signature": signature, **contents}, f, indent=2, sort_keys=True)
