"""Whether a model dir's previous run may be resumed: its signature, written and checked.

A run writes what fixes its trained weights (its signature) beside its checkpoints; a
later run on the same dir resumes only when its signature is the same.
"""

import json
import os
import shutil
from typing import Dict

from util import files, hparams


def check_resume(model_dir: str, config_name: str, signature: Dict, overwrite: bool):
  """Refuses to resume a model dir whose run had another `signature` (what fixes the
  trained weights; a nested dict such as the model's sizes compares field by field)
  than this one, unless `overwrite`: then deletes that run so this one starts over.
  <model_dir>/<config_name> is the JSON write_run_config wrote."""
  path = os.path.join(model_dir, config_name)
  if not os.path.exists(path):
    return
  try:
    with open(path, encoding="utf-8") as f:
      previous = json.load(f)
  except (OSError, ValueError) as e:
    raise hparams.HParamsError(f"{path}: cannot read the previous run's config ({e}); "
                               "set \"overwrite_model_dir\": true to start over") from None
  if "signature" not in previous:  # written before runs were signed: nothing to compare
    return
  changed = _changes(previous["signature"], json.loads(json.dumps(signature)))
  if not changed:
    return
  if not overwrite:
    raise hparams.HParamsError(
        f"{model_dir} holds a run with a different config ({'; '.join(changed[:4])}); "
        "use another model_dir, or set \"overwrite_model_dir\": true to delete that run "
        "and start over")
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


def write_run_config(model_dir: str, config_name: str, signature: Dict, **contents):
  """<model_dir>/<config_name>: the run's signature (for check_resume) and `contents`."""
  with files.atomic_write(os.path.join(model_dir, config_name)) as f:
    json.dump({"signature": signature, **contents}, f, indent=2, sort_keys=True)

