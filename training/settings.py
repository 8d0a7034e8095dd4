"""The run settings both phases share: the run's name and places, and how it uses its
hardware.

Kept free of TensorFlow so that configs (and the commands' --help) load fast.
"""

import dataclasses
from typing import Optional

from util import hparams

STRATEGIES = ("default", "one_device", "mirrored", "multi_worker", "tpu")
PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")


@dataclasses.dataclass(frozen=True)
class RunFields:
  """The fields pre-training and fine-tuning declare alike: the run's name and places,
  its seed, weight decay and sequence length."""
  model_name: str = hparams.field(
      "electra_small", resumable=True,
      help="The run's name, one plain folder name: its model dir is "
           "`<data_dir>/models/<model_name>`; it also picks the size preset "
           "(electra_small, electra_base, ...).")
  data_dir: str = hparams.field(
      "data", resumable=True,
      help="Where the data and the models live, in the original's layout.")
  do_train: bool = hparams.field(
      True, resumable=True, help="Train; false evaluates the saved model only.")
  seed: int = hparams.field(
      0, **hparams.SEED,
      help="Seed of the start, the data order, the masking and dropout.")
  weight_decay_rate: float = hparams.field(
      0.01, at_least=0,
      help="AdamW's weight decay (LayerNorm weights and biases excluded).")
  max_seq_length: int = hparams.field(
      128, at_least=1, help="Word-pieces per sequence.")
  vocab_file: str = hparams.field(
      "", resumable=True,
      group="Locations; empty means the original layout under data_dir",
      help="The vocabulary (empty: the original layout's vocab.txt).")
  model_dir: str = hparams.field(
      "", resumable=True,
      help="Checkpoints, logs and results (empty: the original layout's).")
  overwrite_model_dir: bool = hparams.field(
      False, resumable=True,
      help="Allow a model_dir holding a different run: its run's files are deleted "
           "(what runs do not write there stays).")


@dataclasses.dataclass(frozen=True)
class ScaleSettings:
  """How a run uses its hardware: fields shared by the pre-training and fine-tuning
  configs (new: the original ran on one device in float32). None changes the trained
  weights: each may change when a run resumes."""
  distribution_strategy: str = hparams.field(
      "default", choices=STRATEGIES, resumable=True,
      help="Devices: default, one_device, mirrored (one machine's GPUs), multi_worker "
           "(machines named by TF_CONFIG), tpu.")
  tpu_address: Optional[str] = hparams.field(
      None, resumable=True, help="The TPU, with distribution_strategy tpu.")
  cluster_wait_seconds: int = hparams.field(
      120, at_least=1, resumable=True,
      help="With distribution_strategy multi_worker: how long each worker waits for all "
           "of TF_CONFIG's cluster to start before it ends, naming the workers it did "
           "not hear from.")
  mixed_precision: str = hparams.field(
      "float32", choices=PRECISIONS, resumable=True,
      help="float32, or bfloat16 or float16 arithmetic with float32 weights.")
  use_xla: bool = hparams.field(
      False, resumable=True, help="Compile the training step with XLA.")
  gradient_accumulation_steps: int = hparams.field(
      1, at_least=1, resumable=True,
      help="Each step's batch runs as this many micro-batches whose gradients are "
           "summed: the same update in less memory.")
  recompute: bool = hparams.field(
      False, resumable=True,
      help="Gradient checkpointing: each transformer layer runs again in the backward "
           "pass instead of keeping its activations (model/encoder.py use_recompute).")

  def check_batch_split(self, train_batch_size: int, replicas: int = 1):
    """Refuses a training batch that does not split evenly over `replicas` devices x
    gradient_accumulation_steps micro-batches: the configs ask at build time (one
    device), the trainers again once the strategy knows its devices."""
    steps = self.gradient_accumulation_steps
    if train_batch_size % (replicas * steps):
      raise hparams.HParamsError(
          f"train_batch_size {train_batch_size} does not split evenly over {replicas} "
          f"replica(s) x gradient_accumulation_steps {steps}")
