"""The training loop both phases share, around the step it holds (training/step.py):
from the latest checkpoint to num_train_steps, stopped on a NaN/inf loss without saving
over the last good checkpoint, saved then stopped at a signal, one line when a peer
worker is lost."""

import contextlib
import dataclasses
from typing import Callable, Dict, Optional

import tensorflow as tf
import tf_keras

from runs.checkpoints import RunCheckpoints
from runs.model_files import drop_log_rows_after
from training import stopping
from training.curves import plot_curves
from training.runtime import lost_peer, precision_note
from training.step import TrainStep
from training.step_log import StepLog, first_step_note
from util import stderr
from util.progress import Progress


# The notes before a run's first step, each printed once per process: fine-tuning runs
# the loop once per epoch (and trial), and neither the precision nor the step changes.
_PRINTED_NOTES = set()


class NonFiniteLossError(ValueError):
  """Training produced a NaN or inf loss (or gradient) and was stopped."""


class WorkerLost(ValueError):
  """A peer worker of a multi-worker run died, froze or became unreachable."""


@dataclasses.dataclass
class LoopSettings:
  model_dir: str
  num_train_steps: int
  save_checkpoints_steps: int = 1000
  keep_checkpoint_max: int = 5
  log_every_steps: int = 10
  gradient_accumulation_steps: int = 1
  use_xla: bool = False
  tokens_per_step: int = 0  # global batch x sequence length, for tokens/s
  flops_per_step: float = 0.0  # training FLOPs of one step (model/flops.py), for FLOP/s
  peak_flops: float = 0.0  # of the run's devices (runtime.peak_flops), for % of peak
  learning_rate: Optional[Callable[[int], float]] = None  # step -> lr, for logs
  label: str = "step"
  seed: int = 0  # of the step's stateless seeds (training/step.py)
  # Called on the chief after every step with the step's scalars (a phase's watch on
  # its loss: finetune/prior_watch.py); reading a scalar waits for the step.
  on_step: Optional[Callable[[int, Dict[str, tf.Tensor]], None]] = None
  # The run's record in model_dir (the phase writes it), a copy of which every
  # checkpoint carries: a record lost later is rebuilt from it (runs/record.py).
  record_name: str = ""
  # False: no training-curves PNG at the end of run() (the log is written as ever).
  plot_curves: bool = True


class TrainLoop:
  """Runs its step of `objective` over `model` (`train_step`, training/step.py's
  TrainStep) under `strategy` from the last checkpoint to num_train_steps. Build the
  model and optimizer (and variables) under `strategy.scope()` first."""

  def __init__(self, strategy, model: tf_keras.Model, optimizer, objective,
               settings: LoopSettings):
    self.train_step = step = TrainStep(strategy, model, optimizer, objective, settings)
    self.strategy, self.settings, self.stops = strategy, settings, step.stops
    self.chief = step.worker == 0
    self.checkpoints = RunCheckpoints(
        strategy, {"model": model, "optimizer": optimizer, "step": step.global_step},
        settings.model_dir, settings.keep_checkpoint_max, settings.record_name,
        step.worker)
    # The step the last run() started from (its restored checkpoint's, else 0): a phase
    # running the loop in stages tells from it which stages a checkpoint had passed.
    self.start_step = 0

  def run(self, dataset_fn: Callable[[tf.distribute.InputContext], tf.data.Dataset],
          init_fn: Optional[Callable[[], None]] = None) -> Dict[str, float]:
    """Trains from the latest checkpoint (else `init_fn()`) to num_train_steps on
    `dataset_fn(input_context)`, this worker's batches; returns the last logged scalars
    (or raises NonFiniteLossError, TrainingInterrupted, WorkerLost)."""
    settings = self.settings
    restored, iterator = self.checkpoints.resume(
        lambda: self.train_step.iterator(dataset_fn), init_fn,
        input_position=not self.train_step.distributed_input)
    start = self.start_step = int(self.train_step.global_step.numpy())
    if restored:
      self.stops.saved(start, restored)
    if self.chief:
      drop_log_rows_after(settings.model_dir, start)
      print(f"{'resuming from ' + restored if restored else 'starting'} at step "
            f"{start}/{settings.num_train_steps}; checkpoints in {settings.model_dir}",
            flush=True)
    if start >= settings.num_train_steps:
      return {}
    log = StepLog(settings, start, self.chief)
    with stopping.held(), self.stops:  # the run's handler, else held for this call
      try:
        return self._train_steps(iterator, start, restored, log)
      finally:
        log.writer.flush()
        self.checkpoints.close()
        if self.chief and settings.plot_curves:
          plot_curves(settings.model_dir)

  def _train_steps(self, iterator, start: int, restored: Optional[str], log: StepLog
                   ) -> Dict[str, float]:
    """The steps from `start` to num_train_steps: each logged, saved and checked for a
    non-finite loss as the settings say, and stopped (saved) at a signal; a lost peer
    worker ends them in one line (WorkerLost)."""
    settings = self.settings
    last_saved, logged = restored, {}
    for note in (precision_note(),
                 first_step_note(settings.flops_per_step, settings.peak_flops)):
      if note and self.chief and note not in _PRINTED_NOTES:
        _PRINTED_NOTES.add(note)
        print(note, flush=True)
    step = start
    try:
      while step < settings.num_train_steps:
        self.stops.request()
        # The first call compiles model/fused.py's islands, and TensorFlow tells so.
        with (stderr.without_lines(stderr.FIRST_COMPILE_LINE, stderr.ABSL_FIRST_LINE)
              if step == start else contextlib.nullcontext()):
          scalars = self.train_step(iterator)
        step += 1
        if settings.on_step is not None and self.chief:
          settings.on_step(step, scalars)
        if step == start + 1:
          log.first_step_done(step)
        at_end = step == settings.num_train_steps
        at_save = step % settings.save_checkpoints_steps == 0 or at_end
        at_log = step % settings.log_every_steps == 0 or at_end or step == start + 1
        stopped_by = self.stops.stopped_by()
        if at_save or at_log or stopped_by:
          self._check_finite(last_saved)
        if at_log:
          logged = log.write(step, scalars)
        if at_save or stopped_by:
          last_saved = self.checkpoints.save(step)
          self.stops.saved(step, last_saved)
        if stopped_by:
          raise self.stops.interrupted(stopped_by)
    except tf.errors.OpError as e:
      lost = lost_peer(e, self.strategy)
      if lost is None:
        raise
      # What a re-run resumes from: a chief lost during a save leaves the one before.
      kept = self.checkpoints.latest()
      raise WorkerLost(
          f"lost {lost[0]} after step {step} ({lost[1]}); the last checkpoint is "
          f"{kept or 'none'}: run the same commands on every worker again to "
          f"{'resume from it' if kept else 'start over'}") from None
    return logged

  def _check_finite(self, last_saved: Optional[str]):
    """NonFiniteLossError when a step so far had a NaN/inf loss or gradients."""
    bad = int(self.train_step.bad_step.numpy())
    if bad >= 0:
      raise NonFiniteLossError(
          f"the loss or its gradients became NaN/inf at step {bad}; training "
          f"stopped without saving; the last good checkpoint is "
          f"{last_saved or 'none (no checkpoint was written)'}")

  def evaluate(self, dataset_fn, replica_fn, num_steps: int) -> list:
    """Runs `replica_fn(batch, batch_index)` on num_steps batches from `dataset_fn`;
    what it returns, if anything, comes back as one NumPy nest per batch and local
    replica (for figures that need every value on the host)."""
    iterator = self.train_step.iterator(dataset_fn)
    # No autograph, as the step's: nothing here branches on tensors.
    eval_step = tf.function(lambda iterator, index: self.strategy.run(
        replica_fn, args=(self.train_step.next_batch(iterator), index)), autograph=False)

    progress = Progress("eval", num_steps, "batches", interval=5)
    returned = []
    for index in range(num_steps):
      outputs = eval_step(iterator, tf.constant(index, tf.int64))
      if outputs is not None:
        returned.extend(tf.nest.map_structure(
            lambda t: t.numpy(), self.strategy.experimental_local_results(outputs)))
      if self.chief:
        progress.update(index + 1, force=index + 1 == num_steps)
    return returned
