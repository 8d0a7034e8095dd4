"""Timing the project's training steps: the clocks, and the fine-tuning step of a task.

The step is the commands' own (TrainLoop.train_step, the phase's model, optimizer, loss
and input pipeline), called directly: timed without a run's start-up (restore,
tracing), checkpoints, logs or curves, as the PyTorch peers' loops are.
"""

import os
import time
from typing import Tuple

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
                    folder: str):
  """run_finetuning.py's training step for `task` under `hparams` (over the size's
  preset, with BERT's vocabulary), on `features` (arrays with a leading example axis,
  the task's targets included) cycled through. Returns the loop (loop.model is the
  model) and a call that runs one step and returns its loss."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  from finetune.trainer import Finetuner  # pylint: disable=import-outside-toplevel
  config = finetuning_config(task, hparams, folder)
  finetuner = Finetuner(config, log=lambda _: None)
  features = {**features, "task_id": np.zeros(len(features["input_ids"]), np.int32)}
  loop = finetuner.train_loop(features, num_steps, os.path.join(folder, "model"))
  step = loop.train_step()
  iterator = loop.iterator(finetuner.dataset_fn(features, num_steps, config.seed))
  return loop, lambda: step(iterator)["loss"]
