"""Whether a model dir's previous run may be resumed: its record, written and checked.

A run writes its record beside its checkpoints: what fixes its trained weights (its
signature), its whole config, and the history of the settings that may change when it
is resumed (from which step each value held). A later run on the same dir resumes only
when its signature is the same.
"""

import contextlib
import json
import os
import shutil
from typing import Callable, Dict, List, Optional

from model.weights import CheckpointError, run_files
from util import files, hparams

# Every message that suggests overwrite_model_dir says what it costs.
OVERWRITE_ADVICE = ("set \"overwrite_model_dir\": true to delete that run, checkpoints "
                    "included, and start over")


def read_record(model_dir: str, config_name: str) -> Optional[Dict]:
  """<model_dir>/<config_name> as written by write_run_config, rebuilt from the copy its
  checkpoints carry when lost (run_files.read_record); None if there is none."""
  return run_files.read_record(model_dir, config_name,
                               note=lambda line: print(line, flush=True))


def check_resume(model_dir: str, config_name: str, signature: Dict, overwrite: bool,
                 evaluating: bool = False,
                 renamed: Callable[[Dict], Dict] = lambda values: values):
  """Refuses to resume a model dir whose run had another `signature` (what fixes the
  trained weights; a nested dict such as the model's sizes compares field by field)
  than this one, unless `overwrite`: then deletes that run so this one starts over.
  A field an older record did not sign is compared with its whole config ("config"),
  when it holds the field.

  `evaluating`: this run only reads the trained weights, so `signature` holds just what
  gives them their meaning (sizes, vocabulary, objective); only those fields are
  compared, and a difference is refused whatever `overwrite` says (deleting the run
  would leave nothing to evaluate).

  `renamed`: an older record's signature or config in today's field names."""
  try:
    previous = read_record(model_dir, config_name)
  except CheckpointError:  # a run trained under unknown settings
    if not overwrite or evaluating:
      raise
    start_over(model_dir)
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
  start_over(model_dir)


def start_over(model_dir: str):
  print(f"overwrite_model_dir: deleting the previous run in {model_dir}", flush=True)
  shutil.rmtree(model_dir)


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
