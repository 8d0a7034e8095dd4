"""One training step: the replicas' micro-batches' gradients of the phase's objective,
summed, all-reduced, checked and applied.

The objective is an object the step calls under the gradient tape: `compute(model,
batch, seed, training, step) -> (loss, outputs)`, and `logged(outputs)`, the scalars
the log shows. `seed` is stateless (of settings.seed, the step, the replica and the
micro-step), so a resumed run draws exactly what an uninterrupted one would.
"""

from typing import Callable, Dict

import tensorflow as tf
import tf_keras

from model.internals import create_slots
from training.runtime import stateless_seed, worker_position
from training.stopping import StopRequests

# The key under which _replica_step hands the step the all-reduced stop requests.
_STOP_REQUESTS = "stop_requests"


class TrainStep:
  """The compiled step of `objective` over `model` under `strategy`: `step(iterator)
  -> scalars`, one optimizer step on the next batch of `iterator` (self.iterator), split
  over the replicas and, inside each, into gradient_accumulation_steps micro-batches."""

  def __init__(self, strategy, model: tf_keras.Model, optimizer, objective, settings):
    self.strategy, self.model, self.optimizer = strategy, model, optimizer
    self.objective, self.settings = objective, settings
    self.loss_scaling = isinstance(optimizer, tf_keras.mixed_precision.LossScaleOptimizer)
    with strategy.scope():
      self.global_step = tf.Variable(0, dtype=tf.int64, trainable=False,
                                     name="global_step")
      # First step whose loss or gradients were not finite, or -1; kept on the device
      # so the guard does not stall every step on a host read.
      self.bad_step = tf.Variable(-1, dtype=tf.int64, trainable=False, name="bad_step",
                                  aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
    self.worker, self.workers = worker_position(strategy)
    # Whether the strategy distributes the dataset (a TPU's). Plain tf.data iterators
    # can be checkpointed; for several local replicas next_batch cuts the worker's batch.
    self.distributed_input = isinstance(strategy, tf.distribute.TPUStrategy)
    self.stops = StopRequests(strategy, self.worker, self.workers)
    self.compiled = None  # the step's tf.function, made at the first call
    self._gradients = tf.function(self._compute_gradients, autograph=False,
                                  jit_compile=settings.use_xla or None)

  def iterator(self, dataset_fn: Callable[[tf.distribute.InputContext], tf.data.Dataset]):
    """This worker's iterator over `dataset_fn(input_context)`'s batches, as the step
    and the loop's evaluate read them."""
    dataset = dataset_fn(tf.distribute.InputContext(
        num_input_pipelines=self.workers, input_pipeline_id=self.worker,
        num_replicas_in_sync=self.strategy.num_replicas_in_sync))
    if self.distributed_input:
      return iter(self.strategy.experimental_distribute_dataset(dataset))
    return iter(dataset)

  def next_batch(self, iterator):
    """The next batch of `iterator`, as strategy.run hands it to the replicas: on
    several local replicas (not a TPU's distributed input), cut into equal consecutive
    slices, one each."""
    batch = next(iterator)
    local = self.strategy.num_replicas_in_sync // self.workers
    if self.distributed_input or local == 1:
      return batch
    first = self.worker * local

    def slice_for(context):
      index = context.replica_id_in_sync_group - first
      return {k: tf.split(v, local)[index] for k, v in batch.items()}
    return self.strategy.experimental_distribute_values_from_function(slice_for)

  def __call__(self, iterator) -> Dict[str, tf.Tensor]:
    """One optimizer step on the next batch of `iterator`. Compiled at the first call,
    once: fine-tuning runs its loop once per epoch, which would trace it again each time."""
    if self.compiled is not None:
      return self.compiled(iterator)
    with self.strategy.scope():
      # Slots made now, not inside the first call, spare tf.function a second trace.
      create_slots(getattr(self.optimizer, "inner_optimizer", self.optimizer),
                   self.model.trainable_variables)

    # No autograph: the step has no data-dependent Python control flow, and converting
    # the whole model's code makes the first step much slower to trace.
    @tf.function(autograph=False)
    def step(iterator):
      scalars = self.strategy.run(self._replica_step, args=(self.next_batch(iterator),))
      if _STOP_REQUESTS in scalars:
        self.stops.received(scalars.pop(_STOP_REQUESTS))
      scalars = {k: self.strategy.reduce(tf.distribute.ReduceOp.MEAN, v, axis=None)
                 for k, v in scalars.items()}
      finite = tf.math.is_finite(scalars["loss"])
      if not self.loss_scaling:  # with loss scaling, inf gradients are skipped steps
        finite &= tf.math.is_finite(scalars["grad_norm"])
      self.bad_step.assign(tf.where(finite | (self.bad_step >= 0), self.bad_step,
                                    self.global_step + 1))
      self.global_step.assign_add(1)
      return scalars

    self.compiled = step
    return step(iterator)

  def _replica_step(self, batch):
    settings = self.settings
    context = tf.distribute.get_replica_context()
    replica_id = context.replica_id_in_sync_group
    accumulation = settings.gradient_accumulation_steps
    divisor = float(accumulation * self.strategy.num_replicas_in_sync)
    variables = self.model.trainable_variables
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
    stop_requests = self.stops.in_step(context)
    if stop_requests is not None:  # they ride in the gradients' all-reduce
      reduced.append(stop_requests)
    reduced = context.all_reduce(tf.distribute.ReduceOp.SUM, reduced)
    grads = reduced[:len(pairs)]
    grad_norm = tf.linalg.global_norm(grads)
    # All-reduced above, once (Keras' optimizers, legacy or not, take this flag).
    self.optimizer.apply_gradients(zip(grads, [v for _, v in pairs]),
                                   experimental_aggregate_gradients=False)
    scalars = {k: tf.add_n(v) / len(v) for k, v in scalars.items()}
    scalars["loss"] = tf.add_n(losses) / len(losses)
    scalars["grad_norm"] = grad_norm
    if stop_requests is not None:
      scalars[_STOP_REQUESTS] = reduced[-1]
    return scalars

  def _compute_gradients(self, batch, replica_id, micro_step, divisor):
    seed = stateless_seed(self.settings.seed, self.global_step, replica_id, micro_step)
    with tf.GradientTape() as tape:
      loss, outputs = self.objective.compute(self.model, batch, seed, training=True,
                                             step=self.global_step)
      scalars = self.objective.logged(outputs)
      loss = tf.cast(loss, tf.float32)
      # Replica gradients are summed, so each replica contributes its share of the mean.
      scaled = loss / divisor
      if self.loss_scaling:
        scaled = self.optimizer.get_scaled_loss(scaled)
    grads = tape.gradient(scaled, self.model.trainable_variables,
                          unconnected_gradients=tf.UnconnectedGradients.NONE)
    if self.loss_scaling:
      grads = self.optimizer.get_unscaled_gradients(grads)
    return grads, loss, {k: tf.cast(v, tf.float32) for k, v in scalars.items()}
