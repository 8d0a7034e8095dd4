"""Pre-trained weights in every format the project reads, one module per format.

- original.py: the original release's TF1 checkpoints, by variable name (the mapping
  table every format loads through, and the writer of that format);
- huggingface.py: transformers' ELECTRA directories (and the names, config.json and
  tokenizer files that tools/export_hf.py writes);

formats.py opens any path by asking each format, in its list, whether the path is its
own; a new format is one module answering the same questions and one line in that list
(a run dir's, runs/pretrained.py, registers itself from above: model/ reads no run
record).
by_name.py turns a release's name or a Hugging Face id into the local path it fetched.
"""

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
