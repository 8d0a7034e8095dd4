"""Pre-trained weights in every format the project reads, one module per format
(formats.py asks them); the one error of them all, and their JSON reading."""

import json
from typing import Dict

from util import cli


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


def check_mapping(mapping, shapes: Dict[str, tuple], source: str, what: str,
                  noun: str = "variable", fits: str = "this config", hint: str = ""):
  """Refuses a mapping table (original.py's: name, variable, shape) any of whose names
  `shapes` (those `source` holds) lacks or holds at another shape."""
  missing = [n for n, _, _ in mapping if n not in shapes]
  if missing:
    raise CheckpointError(f"{source}: {len(missing)} {noun}(s) the {what} needs are "
                          f"missing: {cli.listed(missing)}{hint}")
  wrong = [f"{n} has {list(shapes[n])}, expected {list(s)}" for n, _, s in mapping
           if shapes[n] != s]
  if wrong:
    raise CheckpointError(f"{source}: {len(wrong)} {noun}(s) with the wrong shape for "
                          f"{fits}: {'; '.join(wrong[:3])}")
