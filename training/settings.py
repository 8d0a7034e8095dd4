"""The run settings both phases share: how a run uses its hardware.

Kept free of TensorFlow so that configs (and the commands' --help) load fast.
"""

import dataclasses
from typing import Optional

from util import hparams

STRATEGIES = ("default", "one_device", "mirrored", "multi_worker", "tpu")
PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")


@dataclasses.dataclass(frozen=True)
class ScaleSettings:
  """How a run uses its hardware: fields shared by the pre-training and fine-tuning
  configs (new: the original ran on one device in float32)."""
  distribution_strategy: str = hparams.field("default", choices=STRATEGIES)
  tpu_address: Optional[str] = None
  mixed_precision: str = hparams.field("float32", choices=PRECISIONS)
  use_xla: bool = False
  # Each step's batch runs as this many micro-batches whose gradients are summed: the
  # same update in less memory.
  gradient_accumulation_steps: int = hparams.field(1, at_least=1)
  # Gradient checkpointing: each transformer layer runs again in the backward pass
  # instead of keeping its activations (model/encoder.py use_recompute).
  recompute: bool = False
