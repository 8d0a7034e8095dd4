"""Timing the project's training steps: the clocks, and the fine-tuning step of a task.

The step is the commands' own (TrainLoop.train_step, the phase's model, optimizer, loss
and input pipeline), called directly: timed without a run's start-up (restore,
tracing), checkpoints, logs or curves, as the PyTorch peers' loops are.
"""

import os
import time
from typing import Optional, Tuple

from bench import BERT_VOCAB

CLOCKS = {"wall": time.perf_counter,
          # The process's own CPU seconds: with one thread on a core other jobs share,
          # the time the step computed, without the time it waited for the core.
          "cpu": time.process_time}


def time_steps(step, steps: int, warmup: int = 1, clock: str = "wall") -> float:
  """Seconds of `steps` calls of step() after `warmup` untimed ones (tracing, the first
  allocations). step() returns the loss, read after the last call so that work still
  queued is timed too."""
  for _ in range(warmup):
    float(step())
  start = CLOCKS[clock]()
  for _ in range(steps):
    loss = step()
  float(loss)
  return CLOCKS[clock]() - start


def time_first_and_steps(step, steps: int, warmup: int = 1,
                         clock: str = "wall") -> Tuple[float, float]:
  """The seconds of step()'s first call (tracing, compilation, the first allocations),
  and time_steps' seconds of `steps` calls after `warmup` untimed ones, the first call
  among them (at least one)."""
  start = CLOCKS[clock]()
  float(step())
  first = CLOCKS[clock]() - start
  return first, time_steps(step, steps, max(warmup, 1) - 1, clock)


def finetuning_config(task: str, hparams: dict, folder: str = ""):
  """run_finetuning.py's config for `task` under `hparams` (over the size's preset), with
  BERT's vocabulary."""
  from finetune import config as finetune_config  # pylint: disable=import-outside-toplevel
  return finetune_config.load_config("bench", [task], folder,
                                     {"vocab_file": BERT_VOCAB, **hparams})


def finetuning_step(task: str, features: dict, num_steps: int, hparams: dict,
                    folder: str, in_order: bool = False,
                    batches: Optional[list] = None):
  """run_finetuning.py's training step for `task` under `hparams` (over the size's
  preset, with BERT's vocabulary), on `features` (arrays with a leading example axis,
  the task's targets included) through the training input pipeline
  (Finetuner.dataset_fn: batches cut to their longest example as the config says).
  By default the pipeline's own seeded order cycles through them; `in_order`: they are
  num_steps x train_batch_size rows read once in their order, batch i being rows
  i x batch size onwards (placed where the pipeline's order, Finetuner.train_order,
  reads them; length_grouping_batches, which orders by length, left at 0). `batches`,
  a list, gets each batch the step will read as {"length": its token axis, "tokens":
  its input_mask's sum}, from a pass of the same pipeline before the first step.
  Returns the loop (loop.train_step.model is the model) and a call that runs one step
  and returns its loss."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from finetune.trainer import Finetuner  # pylint: disable=import-outside-toplevel
  config = finetuning_config(task, hparams, folder)
  finetuner = Finetuner(config, log=lambda _: None)
  features = {**features, "task_id": np.zeros(len(features["input_ids"]), np.int32)}
  if in_order:
    count = num_steps * config.train_batch_size
    if len(features["input_ids"]) != count or config.length_grouping_batches:
      raise ValueError(f"{len(features['input_ids'])} features in order, with "
                       f"length_grouping_batches {config.length_grouping_batches}; "
                       f"expected {num_steps} steps x train_batch_size "
                       f"{config.train_batch_size}, and 0")
    # The pipeline's j-th example is row order[j]: the j-th given one goes there.
    order = finetuner.train_order(features, num_steps, config.seed)
    placed = {k: np.empty_like(v) for k, v in features.items()}
    for k, v in features.items():
      placed[k][order] = v
    features = placed
  loop = finetuner.train_loop(features, num_steps, os.path.join(folder, "model"))
  step = loop.train_step
  dataset_fn = finetuner.dataset_fn(features, num_steps, config.seed)
  if batches is not None:
    batches.extend({"length": int(batch["input_ids"].shape[1]),
                    "tokens": int(tf.reduce_sum(batch["input_mask"]))}
                   for batch in dataset_fn(tf.distribute.InputContext()))
  iterator = step.iterator(dataset_fn)
  return loop, lambda: step(iterator)["loss"]
