"""A run's start from pre-trained weights: the one step both phases take.

`open_start(path)` opens the weights once; the run takes its sizes from them, loads them
and names them in its record by `record_name`, the same in both phases' records: a
released model by its name, any other by its weights' absolute location (a run dir's
newest checkpoint, a checkpoint prefix, a Hugging Face directory).
"""

import dataclasses
import os
from typing import Dict, Optional

from model.weights import by_name
from model.weights.formats import Weights
from runs.pretrained import open_weights


@dataclasses.dataclass(frozen=True)
class PretrainedStart:
  given: str  # as configured: a path, a release's name or a Hugging Face id
  weights: Weights

  @property
  def record_name(self) -> str:
    if by_name.is_name(self.given):
      return self.given
    return os.path.abspath(self.weights.location)

  def in_todays_name(self, values: Dict) -> Dict:
    """A record's signature or config whose init_checkpoint names this start as older
    records did (pre-training the given path, fine-tuning the location, each made
    absolute) with today's record_name instead."""
    older = (by_name.stable(self.given), os.path.abspath(self.weights.location))
    if values.get("init_checkpoint") in older:
      return dict(values, init_checkpoint=self.record_name)
    return values


def open_start(path: str) -> Optional[PretrainedStart]:
  """The weights at `path` opened (a CheckpointError when they cannot be), or None for
  no path: a start from random weights."""
  return PretrainedStart(path, open_weights(path)) if path else None


def record_name(start: Optional[PretrainedStart]) -> str:
  """How a run record names its start: record_name, or "" from random weights."""
  return start.record_name if start else ""


def in_todays_name(start: Optional[PretrainedStart]):
  """record.check_resume's `renamed` for a run with this start."""
  return start.in_todays_name if start else lambda values: values
