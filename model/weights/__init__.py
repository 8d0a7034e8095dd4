"""Pre-trained weights in every format the project reads, one module per format
(formats.py asks them); the one error of them all, and their JSON reading."""

import json
from typing import Dict

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
