"""Hyperparameter objects: defaults live as data in configs/, overrides come from JSON.

Every phase (model sizes, pre-training, fine-tuning) keeps its hyperparameters in one
dataclass. Overrides are applied by name, like the original's `config.update(kwargs)`,
and an unknown name is an error that suggests the closest valid one.
"""

import dataclasses
import difflib
import json
import os
from typing import Any, Dict

CONFIGS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "configs")


class HParamsError(ValueError):
  """A hyperparameter name or value that cannot be used."""


def unknown_name_message(name: str, valid, what: str = "hyperparameter") -> str:
  close = difflib.get_close_matches(name, list(valid), n=1, cutoff=0.5)
  hint = f"; did you mean {close[0]!r}?" if close else ""
  return f"unknown {what} {name!r}{hint}"


def update(obj, overrides: Dict[str, Any], source: str = "--hparams"):
  """Returns a copy of dataclass `obj` with `overrides` applied; unknown names fail."""
  names = {f.name for f in dataclasses.fields(obj)}
  for name in overrides:
    if name not in names:
      raise HParamsError(f"{source}: {unknown_name_message(name, names)}")
  return dataclasses.replace(obj, **overrides)


def parse_hparams(text: str, flag: str = "--hparams") -> Dict[str, Any]:
  """Reads `--hparams`: a JSON object, or the path of a JSON file holding one."""
  text = (text or "").strip()
  if not text:
    return {}
  if not text.startswith("{"):
    if not os.path.isfile(text):
      raise HParamsError(f"{flag}: {text!r} is neither a JSON object nor an existing "
                         "JSON file")
    with open(text, encoding="utf-8") as f:
      source, text = text, f.read()
  else:
    source = flag
  try:
    value = json.loads(text)
  except json.JSONDecodeError as e:
    raise HParamsError(f"{source}: invalid JSON at line {e.lineno} column {e.colno}: "
                       f"{e.msg}") from None
  if not isinstance(value, dict):
    raise HParamsError(f"{source}: expected a JSON object of name: value pairs, got "
                       f"{type(value).__name__}")
  return value


def load_preset(*path_parts: str) -> Dict[str, Any]:
  """Loads configs/<path_parts>.json (presets shipped with the project)."""
  path = os.path.join(CONFIGS_DIR, *path_parts) + ".json"
  if not os.path.isfile(path):
    folder = os.path.dirname(path)
    known = sorted(n[:-5] for n in os.listdir(folder) if n.endswith(".json")) \
        if os.path.isdir(folder) else []
    raise HParamsError(f"no preset {path_parts[-1]!r} in {folder} (known: "
                       f"{', '.join(known) or 'none'})")
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def model_size(model_name: str, overrides: Dict[str, Any]) -> str:
  """The size preset of a run: `model_size` if given, else the one its name mentions
  (electra_tiny/small/base/large), else "small"."""
  return overrides.get("model_size") or next(
      (s for s in ("tiny", "small", "base", "large") if s in model_name), "small")
