"""A run's start from pre-trained weights: the one step both phases take.

`open_start(path)` opens the weights once; the run takes its sizes from them, loads them
and names them in its record by `record_name`, the same in both phases' records: a
released model by its name, any other by its weights' absolute location (a run dir's
newest checkpoint, a checkpoint prefix, a Hugging Face directory).
"""

import dataclasses
import os
from typing import Optional

from model.weights import by_name
from model.weights.formats import Weights
from runs.pretrained import open_weights


@dataclasses.dataclass(frozen=True)
class PretrainedStart:
  given: str  # as configured: a path, a release's name or a Hugging Face id
  weights: Weights


def open_start(path: str) -> Optional[PretrainedStart]:
  """The weights at `path` opened (a CheckpointError when they cannot be), or None for
  no path: a start from random weights."""
  return PretrainedStart(path, open_weights(path)) if path else None


def record_name(start: Optional[PretrainedStart]) -> str:
  """How a run record names its start ("" from random weights)."""
  if not start:
    return ""
  return start.given if by_name.is_name(start.given) else os.path.abspath(
      start.weights.location)
