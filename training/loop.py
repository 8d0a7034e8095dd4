"""The training-loop skeleton that pre-training and fine-tuning share.

It owns what every phase needs and no phase should re-implement: replicas of a
tf.distribute strategy (training/runtime.py makes it), XLA, gradient accumulation, a
checkpoint manager that resumes exactly (step, model, optimizer slots, the data iterator
and the dropout generator's state), SIGINT/SIGTERM save-then-exit (on several workers, a
signal to any one stops them all after the same step), a guard that stops on a NaN/inf
loss without saving over the last good checkpoint, one line when a peer worker is lost,
a progress line, TensorBoard scalars, a JSON-lines log and, at the end, a PNG of the
training curves.

A phase supplies `loss_fn(batch, step, replica_id, micro_step) -> (loss, scalars)`; the
step and replica id let it derive stateless random seeds, so a resumed run draws exactly
what an uninterrupted one would.
"""

import contextlib
import dataclasses
import glob
import json
import os
import shutil
import signal
import time
from typing import Callable, Dict, Optional

import tensorflow as tf
import tf_keras

from model.dropout import dropout_generators
from model.internals import create_slots
from model.weights import CheckpointError
from model.weights.run_files import (CHECKPOINT_NAME, RECORD_KEY, carried_record,
                                     first_readable, kept_checkpoints)
from training.curves import CURVES_NAME, LOG_NAME, drop_rows_after, plot_curves
from training.runtime import is_chief, lost_peer, precision_note, worker_position
from util import cli, cpu, stderr
from util.progress import Progress, format_duration


# What the loop writes in a model dir, as glob patterns relative to it: with the phase's
# record and own files, all a run writes there, and all that training/resume.py deletes.
LOOP_FILES = ("checkpoint", f"{CHECKPOINT_NAME}-*", "data_state", "train", ".worker_tmp",
              LOG_NAME, CURVES_NAME)


class NonFiniteLossError(ValueError):
  """Training produced a NaN or inf loss (or gradient) and was stopped."""


class TrainingInterrupted(cli.Interrupted):
  """SIGINT/SIGTERM arrived; a checkpoint was saved first (see `message`)."""


class WorkerLost(ValueError):
  """A peer worker of a multi-worker run died, froze or became unreachable."""


# The key under which _replica_step hands train_step the all-reduced stop requests.
_STOP_REQUESTS = "stop_requests"


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
  # Called on the chief after every step with the step's scalars (a phase's watch on
  # its loss: finetune/prior_watch.py); reading a scalar waits for the step.
  on_step: Optional[Callable[[int, Dict[str, tf.Tensor]], None]] = None
  # The run's record in model_dir (the phase writes it), a copy of which every
  # checkpoint carries: a record lost later is rebuilt from it (run_files.read_record).
  record_name: str = ""
  # False: no training-curves PNG at the end of run() (the log is written as ever).
  plot_curves: bool = True


class TrainLoop:
  """Runs `loss_fn` under `strategy` from the last checkpoint to num_train_steps.

  Build the model and optimizer (and variables) under `strategy.scope()` first. Each
  worker's batch is split over its replicas and, inside a replica, into
  `gradient_accumulation_steps` micro-batches whose gradients are summed before one
  optimizer step.
  """

  def __init__(self, strategy, model: tf_keras.Model, optimizer, loss_fn,
               settings: LoopSettings):
    self.strategy, self.model, self.optimizer = strategy, model, optimizer
    self.loss_fn, self.settings = loss_fn, settings
    self.chief = is_chief(strategy)
    self.loss_scaling = isinstance(optimizer, tf_keras.mixed_precision.LossScaleOptimizer)
    with strategy.scope():
      self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
      # First step whose loss or gradients were not finite, or -1; kept on the device
      # so the guard does not stall every step on a host read.
      self.bad_step = tf.Variable(-1, dtype=tf.int64, trainable=False, name="bad_step",
                                  aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
    # Outside the strategy's scope: a string for the host, not a value to mirror.
    self._record = tf.Variable("", dtype=tf.string, trainable=False, name=RECORD_KEY)
    self._stop_signal = None
    self.worker, self.workers = worker_position(strategy)
    if self.workers > 1:
      # Each worker's stop request (the number of the signal it took, at its index), and
      # the sum over workers that a step's gradient all-reduce carries along: every
      # worker learns of a signal to any one after the same step, at no extra exchange.
      self._stop_request = tf.Variable(tf.zeros([self.workers]), trainable=False,
                                       name="stop_request")
      self._stop_requests = tf.Variable(tf.zeros([self.workers]), trainable=False,
                                        name="stop_requests")
      self._sum_over_workers = tf.function(self._summed_over_workers, autograph=False)
    self._compiled_step = None
    # The step the last run() started from (its restored checkpoint's, else 0): a phase
    # running the loop in stages tells from it which stages a checkpoint had passed.
    self.start_step = 0
    self._readable = (None, None)  # (newest checkpoint, the newest that reads whole)
    # One micro-batch's gradients, compiled on its own (XLA when asked) and called by
    # each replica's step (_replica_step).
    self._gradients = tf.function(self._compute_gradients, autograph=False,
                                  jit_compile=settings.use_xla or None)

  @property
  def trainable_variables(self):
    return self.model.trainable_variables

  # ---- checkpoints -------------------------------------------------------------

  def _dropout_generators(self):
    """The dropout layers' random generators, created now so checkpoints hold them.

    Keras does not track them (they are made lazily, at the first training call), so
    without this a resumed run would drop different units than an uninterrupted one.
    """
    with self.strategy.scope():
      return dropout_generators(self.model)

  def _manager(self) -> tf.train.CheckpointManager:
    carried = {RECORD_KEY: self._record} if self.settings.record_name else {}
    checkpoint = tf.train.Checkpoint(model=self.model, optimizer=self.optimizer,
                                     step=self.step,
                                     dropout_generators=self._dropout_generators(),
                                     **carried)
    directory = self.settings.model_dir
    if not self.chief:
      # Every worker must write (collective ops); only the chief's copy is kept.
      directory = os.path.join(directory, ".worker_tmp", str(self.worker))
    return tf.train.CheckpointManager(checkpoint, directory,
                                      max_to_keep=self.settings.keep_checkpoint_max,
                                      checkpoint_name=CHECKPOINT_NAME)

  def _data_manager(self, iterator) -> tf.train.CheckpointManager:
    """Each worker's input position, saved beside the model at the same steps."""
    directory = os.path.join(self.settings.model_dir, "data_state",
                             f"worker_{self.worker}")
    return tf.train.CheckpointManager(tf.train.Checkpoint(iterator=iterator), directory,
                                      max_to_keep=self.settings.keep_checkpoint_max,
                                      checkpoint_name=CHECKPOINT_NAME)

  def _carry_record(self):
    """The record as its file now says, into the checkpoint about to be saved (a file
    gone or unreadable meanwhile leaves the copy restored or carried last)."""
    name = self.settings.record_name
    try:
      with open(os.path.join(self.settings.model_dir, name), encoding="utf-8") as f:
        record = json.load(f)
    except (OSError, ValueError):
      return
    if record and isinstance(record, dict):  # never carry a file that is not a record
      self._record.assign(carried_record(name, record))

  def latest_checkpoint(self) -> Optional[str]:
    """The newest of the model dir's checkpoints that reads whole (None if it has none).

    A newer one that does not (a truncated file: a full disk, a copy cut short) is
    skipped, saying why; when none reads, a CheckpointError names the newest's file.
    Checkpoints on disk whose state file is gone are found and listed in it again.
    """
    note = (lambda line: print(line, flush=True)) if self.chief else (lambda _: None)
    newest_first = list(reversed(kept_checkpoints(self.settings.model_dir, note,
                                                  repair=self.chief)))
    if not newest_first:
      return None
    if self._readable[0] != newest_first[0]:  # each new state is checked once
      self._readable = (newest_first[0],
                        first_readable(newest_first, self.settings.model_dir, note))
    return self._readable[1]

  def restore(self, path: Optional[str] = None) -> Optional[str]:
    """Restores the model, optimizer and step of the latest checkpoint (or of `path`);
    returns its path."""
    path = path or self.latest_checkpoint()
    if path:
      try:
        self._manager().checkpoint.restore(path).expect_partial()
      except ValueError as e:  # TensorFlow's "incompatible tensor with shape ..."
        raise CheckpointError(
            f"{path}: not a checkpoint of this config's model ({cli.first_line(e)}); "
            "give the run's own settings, or use another model_dir") from None
    return path

  def input_context(self) -> tf.distribute.InputContext:
    return tf.distribute.InputContext(num_input_pipelines=self.workers,
                                      input_pipeline_id=self.worker,
                                      num_replicas_in_sync=self.strategy.num_replicas_in_sync)

  @property
  def _distributed_input(self) -> bool:
    """Whether the strategy distributes the dataset (a TPU's). Plain tf.data iterators
    can be checkpointed; for several local replicas the step splits the worker's batch
    itself (below)."""
    return isinstance(self.strategy, tf.distribute.TPUStrategy)

  def iterator(self, dataset_fn: Callable[[tf.distribute.InputContext], tf.data.Dataset]):
    """This worker's iterator over `dataset_fn(input_context)`'s batches, as train_step
    and evaluate read them."""
    dataset = dataset_fn(self.input_context())
    if self._distributed_input:
      return iter(self.strategy.experimental_distribute_dataset(dataset))
    return iter(dataset)

  def _split_over_replicas(self, batch):
    """The worker's batch, cut into equal consecutive slices, one per local replica."""
    local = self.strategy.num_replicas_in_sync // self.workers
    if local == 1:
      return batch
    first = self.worker * local

    def slice_for(context):
      index = context.replica_id_in_sync_group - first
      return {k: tf.split(v, local)[index] for k, v in batch.items()}
    return self.strategy.experimental_distribute_values_from_function(slice_for)

  # ---- one step ---------------------------------------------------------------

  def _replica_step(self, batch):
    settings = self.settings
    context = tf.distribute.get_replica_context()
    replica_id = context.replica_id_in_sync_group
    accumulation = settings.gradient_accumulation_steps
    divisor = float(accumulation * self.strategy.num_replicas_in_sync)
    variables = self.trainable_variables
    micro_batches = [{k: v[i::accumulation] for k, v in batch.items()}
                     for i in range(accumulation)] if accumulation > 1 else [batch]
    total_grads, losses, scalars = None, [], {}
    for micro_step, micro_batch in enumerate(micro_batches):
      # Each micro-step waits for the previous one's gradients: otherwise the graph runs
      # them concurrently and holds every micro-batch's activations at once.
      after = [g for g in total_grads or [] if g is not None]
      with tf.control_dependencies(after):
        micro_batch = {k: tf.identity(v) for k, v in micro_batch.items()}
      grads, loss, micro_scalars = self._gradients(micro_batch, replica_id, micro_step,
                                                   divisor)
      # Embedding gradients come as IndexedSlices with one row per token occurrence;
      # made dense, they sum across micro-steps and their global norm (for clipping) is
      # that of the true gradient, as on the original's TPU path (one-hot embeddings),
      # instead of counting a repeated token's rows separately.
      grads = [None if g is None else tf.convert_to_tensor(g) for g in grads]
      total_grads = grads if total_grads is None else [
          None if a is None else a + b for a, b in zip(total_grads, grads)]
      losses.append(loss)
      for name, value in micro_scalars.items():
        scalars.setdefault(name, []).append(value)
    pairs = [(g, v) for g, v in zip(total_grads, variables) if g is not None]
    reduced = [g for g, _ in pairs]
    if self.workers > 1:  # the stop requests ride in the gradients' all-reduce
      reduced.append(self._from_one_replica_per_worker(self._stop_request, context))
    reduced = context.all_reduce(tf.distribute.ReduceOp.SUM, reduced)
    grads = reduced[:len(pairs)]
    grad_norm = tf.linalg.global_norm(grads)
    self._apply(list(zip(grads, [v for _, v in pairs])))
    scalars = {k: tf.add_n(v) / len(v) for k, v in scalars.items()}
    scalars["loss"] = tf.add_n(losses) / len(losses)
    scalars["grad_norm"] = grad_norm
    if self.workers > 1:
      scalars[_STOP_REQUESTS] = reduced[-1]
    return scalars

  def _from_one_replica_per_worker(self, values, context):
    """`values` from this worker's first replica, zeros from its others: summed over
    replicas, each worker's count once."""
    first = self.worker * (self.strategy.num_replicas_in_sync // self.workers)
    return values * tf.cast(tf.equal(context.replica_id_in_sync_group, first),
                            values.dtype)

  def _summed_over_workers(self, values):
    """The sum over workers of each one's `values` (float32, the same shape on all): an
    exchange of its own, which returns only once every worker has made it."""
    per_replica = self.strategy.run(
        lambda: self._from_one_replica_per_worker(tf.identity(values),
                                                  tf.distribute.get_replica_context()))
    return self.strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

  def _compute_gradients(self, batch, replica_id, micro_step, divisor):
    with tf.GradientTape() as tape:
      loss, scalars = self.loss_fn(batch, self.step, replica_id, micro_step)
      loss = tf.cast(loss, tf.float32)
      # Replica gradients are summed, so each replica contributes its share of the mean.
      scaled = loss / divisor
      if self.loss_scaling:
        scaled = self.optimizer.get_scaled_loss(scaled)
    grads = tape.gradient(scaled, self.trainable_variables,
                          unconnected_gradients=tf.UnconnectedGradients.NONE)
    if self.loss_scaling:
      grads = self.optimizer.get_unscaled_gradients(grads)
    return grads, loss, {k: tf.cast(v, tf.float32) for k, v in scalars.items()}

  def _apply(self, grads_and_vars):
    kwargs = {}
    if isinstance(self.optimizer, (tf_keras.optimizers.legacy.Optimizer,
                                   tf_keras.mixed_precision.LossScaleOptimizer)):
      kwargs["experimental_aggregate_gradients"] = False  # summed above, once
    self.optimizer.apply_gradients(grads_and_vars, **kwargs)

  def train_step(self) -> Callable[..., Dict[str, tf.Tensor]]:
    """The compiled step, `train_step(iterator) -> scalars`: one optimizer step on the
    next batch of `iterator` (self.iterator). run() calls it between its checkpoints and
    logs; the benches time it alone. Made once per loop: fine-tuning runs the loop once
    per epoch, and a new step would be traced and compiled again each time."""
    if self._compiled_step is not None:
      return self._compiled_step
    with self.strategy.scope():
      # Slots made now, not inside the first call, spare tf.function a second trace.
      optimizer = getattr(self.optimizer, "inner_optimizer", self.optimizer)
      create_slots(optimizer, self.trainable_variables)

    # No autograph: the step has no data-dependent Python control flow, and converting
    # the whole model's code makes the first step much slower to trace.
    @tf.function(autograph=False)
    def train_step(iterator):
      batch = next(iterator)
      if not self._distributed_input:
        batch = self._split_over_replicas(batch)
      scalars = self.strategy.run(self._replica_step, args=(batch,))
      if self.workers > 1:
        # Alike on every replica already: this worker's first copy, no further exchange.
        self._stop_requests.assign(self.strategy.experimental_local_results(
            scalars.pop(_STOP_REQUESTS))[0])
      scalars = {k: self.strategy.reduce(tf.distribute.ReduceOp.MEAN, v, axis=None)
                 for k, v in scalars.items()}
      finite = tf.math.is_finite(scalars["loss"])
      if not self.loss_scaling:  # with loss scaling, inf gradients are skipped steps
        finite &= tf.math.is_finite(scalars["grad_norm"])
      self.bad_step.assign(tf.where(finite | (self.bad_step >= 0), self.bad_step,
                                    self.step + 1))
      self.step.assign_add(1)
      return scalars

    self._compiled_step = train_step
    return train_step

  # ---- the loop ----------------------------------------------------------------

  def _on_signal(self, signum, frame):
    del frame
    self._stop_signal = signal.Signals(signum).name

  def run(self, dataset_fn: Callable[[tf.distribute.InputContext], tf.data.Dataset],
          init_fn: Optional[Callable[[], None]] = None) -> Dict[str, float]:
    """Trains from the latest checkpoint (else `init_fn()`) to num_train_steps.

    `dataset_fn(input_context)` returns this worker's dataset of batches of
    input_context.get_per_replica_batch_size(global) x local replicas examples.
    Returns the last logged scalars. Raises NonFiniteLossError or TrainingInterrupted.
    """
    settings = self.settings
    iterator = self.iterator(dataset_fn)
    # First: a lost state file is rebuilt before the manager reads it.
    self.latest_checkpoint()
    manager = self._manager()
    data_manager = None if self._distributed_input else self._data_manager(iterator)
    restored = self.restore()
    if not restored and init_fn is not None:
      init_fn()
    if (restored and data_manager is not None
        and not self._restore_input_position(data_manager, restored)):
      # A failed restore can leave the iterator half-restored (at its end): the data
      # starts over in a new one.
      iterator = self.iterator(dataset_fn)
      data_manager = self._data_manager(iterator)
    start = self.start_step = int(self.step.numpy())
    if self.chief:
      drop_rows_after(os.path.join(settings.model_dir, LOG_NAME), start)
      print(f"{'resuming from ' + restored if restored else 'starting'} at step "
            f"{start}/{settings.num_train_steps}; checkpoints in {settings.model_dir}",
            flush=True)
    if start >= settings.num_train_steps:
      return {}
    train_step = self.train_step()
    writer = tf.summary.create_file_writer(os.path.join(settings.model_dir, "train")) \
        if self.chief else tf.summary.create_noop_writer()
    previous_handlers = {s: signal.signal(s, self._on_signal)
                         for s in (signal.SIGINT, signal.SIGTERM)}
    try:
      return self._train_steps(train_step, iterator, start, restored, manager,
                               data_manager, writer)
    finally:
      for s, handler in previous_handlers.items():
        signal.signal(s, handler)
      self._stop_signal = None
      if self.workers > 1:
        self._stop_request.assign(tf.zeros([self.workers]))
      writer.flush()
      if not self.chief:  # its checkpoint copies were only needed for the collectives
        shutil.rmtree(manager.directory, ignore_errors=True)
      if self.chief and settings.plot_curves:
        plot_curves(os.path.join(settings.model_dir, LOG_NAME),
                    os.path.join(settings.model_dir, CURVES_NAME))

  def _restore_input_position(self, data_manager, restored: str) -> bool:
    """Puts the input where the restored checkpoint's step left it (True), or says the
    data starts over (False: none saved, or a state that does not read whole, such as
    one naming files that moved)."""
    data_state = os.path.join(data_manager.directory,
                              f"{CHECKPOINT_NAME}-{int(self.step.numpy())}")
    problem = "none saved"
    if tf.io.gfile.exists(data_state + ".index"):
      try:  # read by restoring: an iterator's state is no tensor a reader can read
        data_manager.checkpoint.restore(data_state)
        problem = None
      except (tf.errors.OpError, ValueError, IndexError) as e:
        problem = f"{data_state}: {cli.first_line(e)}"
    if problem is not None and self.chief:
      print(f"note: no input position for {restored} ({problem}); the data starts over",
            flush=True)
    return problem is None

  def _train_steps(self, train_step, iterator, start: int, restored: Optional[str],
                   manager, data_manager, writer) -> Dict[str, float]:
    """The steps from `start` to num_train_steps: each logged, saved and checked for a
    non-finite loss as the settings say, and stopped (saved) at a signal; a lost peer
    worker ends them in one line (WorkerLost)."""
    settings = self.settings
    progress = Progress(settings.label, settings.num_train_steps, "steps", start=start,
                        interval=0)
    last_saved, logged = restored, {}
    for note in (precision_note(),
                 first_step_note(settings.flops_per_step, settings.peak_flops)):
      if note and self.chief:
        print(note, flush=True)
    step = start
    try:
      while step < settings.num_train_steps:
        self._request_stop()
        # The first call compiles model/fused.py's islands, and TensorFlow tells so.
        with (stderr.without_lines(stderr.FIRST_COMPILE_LINE, stderr.ABSL_FIRST_LINE)
              if step == start else contextlib.nullcontext()):
          scalars = train_step(iterator)
        step += 1
        if settings.on_step is not None and self.chief:
          settings.on_step(step, scalars)
        if step == start + 1:  # rates from here on: the first step includes tracing
          progress.start_count, progress.t0 = step, time.time()
        at_end = step == settings.num_train_steps
        at_save = step % settings.save_checkpoints_steps == 0 or at_end
        at_log = step % settings.log_every_steps == 0 or at_end or step == start + 1
        stopped_by = self._stopped_by(at_end)
        if at_save or at_log or stopped_by:
          self._check_finite(last_saved)
        if at_log:
          logged = self._log(step, scalars, progress, writer)
        if at_save or stopped_by:
          if settings.record_name:
            self._carry_record()
          if data_manager is not None:
            save_checkpoint(data_manager, step)
          # Named as the chief's copy on every worker: the others' are scratch.
          last_saved = os.path.join(settings.model_dir,
                                    os.path.basename(save_checkpoint(manager, step)))
        if stopped_by:
          raise TrainingInterrupted(self._interruption(stopped_by, step, last_saved))
    except tf.errors.OpError as e:
      lost = lost_peer(e, self.strategy)
      if lost is None:
        raise
      # What a re-run resumes from: a chief lost during a save leaves the one before.
      kept = self.latest_checkpoint()
      raise WorkerLost(
          f"lost {lost[0]} after step {step} ({lost[1]}); the last checkpoint is "
          f"{kept or 'none'}: run the same commands on every worker again to "
          f"{'resume from it' if kept else 'start over'}") from None
    return logged

  def _request_stop(self):
    """On several workers, a signal this one took goes into the next step's exchange."""
    if self.workers > 1 and self._stop_signal is not None:
      self._stop_request[self.worker].assign(signal.Signals[self._stop_signal].value)

  def _stopped_by(self, at_end: bool) -> Dict[int, str]:
    """The signals that stop the run after this step, by the index of the worker that
    took each: on several workers, the ones every worker learned of in this step's
    exchange (so all stop at the same step)."""
    if self.workers == 1:
      return {0: self._stop_signal} if self._stop_signal is not None else {}
    requests = self._stop_requests
    if at_end:  # one more exchange: a signal taken during the last step rode in none
      self._request_stop()
      requests = self._sum_over_workers(self._stop_request)
    return {worker: signal.Signals(int(number)).name
            for worker, number in enumerate(requests.numpy()) if number}

  def _interruption(self, stopped_by: Dict[int, str], step: int, saved: str) -> str:
    """What TrainingInterrupted says, once every worker has saved (the exchange that
    waits for all: a chief whose save failed never makes it, and the others then end
    as with a lost peer)."""
    if self.workers == 1:
      return (f"{stopped_by[0]} at step {step}: saved {saved}; run the same command "
              "again to resume")
    self._sum_over_workers(self._stop_request)
    signals = ", ".join(f"{name} on worker {worker}"
                        for worker, name in sorted(stopped_by.items()))
    return (f"{signals} at step {step}: every worker stopped there and the chief saved "
            f"{saved}; run the same commands on every worker again to resume")

  def _check_finite(self, last_saved: Optional[str]):
    """NonFiniteLossError when a step so far had a NaN/inf loss or gradients."""
    bad = int(self.bad_step.numpy())
    if bad >= 0:
      raise NonFiniteLossError(
          f"the loss or its gradients became NaN/inf at step {bad}; training "
          f"stopped without saving; the last good checkpoint is "
          f"{last_saved or 'none (no checkpoint was written)'}")

  def evaluate(self, dataset_fn, replica_fn, num_steps: int) -> list:
    """Runs `replica_fn(batch, batch_index)` on num_steps batches from `dataset_fn`.

    The function accumulates what it needs (e.g. metric objects built in the scope);
    what it returns, if anything, comes back as a list with one NumPy nest per batch and
    local replica (for figures that need every value on the host).
    """
    iterator = self.iterator(dataset_fn)

    @tf.function(autograph=False)  # as train_step: nothing here branches on tensors
    def eval_step(iterator, index):
      batch = next(iterator)
      if not self._distributed_input:
        batch = self._split_over_replicas(batch)
      return self.strategy.run(replica_fn, args=(batch, index))

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

  def _log(self, step, scalars, progress, writer) -> Dict[str, float]:
    values = {k: float(v.numpy()) for k, v in scalars.items()}
    if self.settings.learning_rate is not None:
      values["learning_rate"] = float(self.settings.learning_rate(step))
    if not self.chief:
      return values
    progress.done = step
    rate = progress.rate()
    extra = {k: f"{v:.4g}" for k, v in values.items() if k != "grad_norm"}
    if self.settings.tokens_per_step:
      extra["tokens/s"] = f"{rate * self.settings.tokens_per_step:,.0f}"
    if self.settings.flops_per_step:
      # Logged, not only printed: FLOP/s compares runs across hardware and model sizes.
      values["train_flops"] = step * self.settings.flops_per_step
      values["flops_per_s"] = rate * self.settings.flops_per_step
      extra["FLOPs"] = f"{values['train_flops']:.2e}"
      extra["GFLOP/s"] = f"{values['flops_per_s'] / 1e9:.3g}"
      fraction = cpu.peak_fraction(values["flops_per_s"], self.settings.peak_flops)
      if fraction is not None:
        values["peak_fraction"] = fraction
        extra["of peak"] = f"{fraction:.0%}"
      elif self.settings.peak_flops:  # a rate past it: the peak is wrong
        extra["peak"] = "unknown"
    progress.update(step, extra, force=True)
    with writer.as_default(step=step):
      for name, value in values.items():
        tf.summary.scalar(name, value)
    with open(os.path.join(self.settings.model_dir, LOG_NAME), "a",
              encoding="utf-8") as f:
      f.write(json.dumps({"step": step, **values}) + "\n")
    return values


# A first step expected to run longer than this gets a line before it: nothing else is
# printed until it ends. Its time is reckoned at half the devices' peak FLOP/s, which
# CPUs rarely reach, so the figure is a floor.
LONG_FIRST_STEP_SECONDS = 60
FIRST_STEP_PEAK_FRACTION = 0.5


def first_step_note(flops_per_step: float, peak_flops: float) -> Optional[str]:
  """The line that says a first step will take long, or None."""
  if not flops_per_step or not peak_flops:
    return None
  seconds = flops_per_step / (FIRST_STEP_PEAK_FRACTION * peak_flops)
  if seconds < LONG_FIRST_STEP_SECONDS:
    return None
  return (f"note: one training step is {flops_per_step:.2g} FLOPs: the first takes at "
          f"least {format_duration(seconds)} on these devices (and compiles first); no "
          "line comes before it ends")


def save_checkpoint(manager: tf.train.CheckpointManager, step: int) -> str:
  """manager.save; a failed save (a full disk, a read-only dir) leaves no <prefix>_temp
  directory of half-written shards behind."""
  try:
    return manager.save(checkpoint_number=step)
  except BaseException:
    for path in glob.glob(os.path.join(glob.escape(manager.directory), "*_temp")):
      shutil.rmtree(path, ignore_errors=True)
    raise

