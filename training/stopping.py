"""SIGINT/SIGTERM during a run: the loop saves after the step, then stops.

On several workers a signal to any one stops them all after the same step: each
worker's request (the number of the signal it took, at its index) rides in the step's
gradient all-reduce, so every worker learns of it at no extra exchange.
"""

import signal
from typing import Dict

import tensorflow as tf

from util import cli


class TrainingInterrupted(cli.Interrupted):
  """SIGINT/SIGTERM arrived; a checkpoint was saved first (see `message`)."""


class StopRequests:
  """The signals a run took, as a block (`with`) that holds the handlers."""

  def __init__(self, strategy, worker: int, workers: int):
    self.strategy, self.worker, self.workers = strategy, worker, workers
    self._signal = None
    if workers > 1:
      # This worker's request, and the sum over workers a step's all-reduce carries.
      self._request = tf.Variable(tf.zeros([workers]), trainable=False,
                                  name="stop_request")
      self._requests = tf.Variable(tf.zeros([workers]), trainable=False,
                                   name="stop_requests")
      self._sum_over_workers = tf.function(self._summed_over_workers, autograph=False)

  def __enter__(self):
    self._previous = {s: signal.signal(s, self._on_signal)
                      for s in (signal.SIGINT, signal.SIGTERM)}
    return self

  def __exit__(self, *exc):
    for s, handler in self._previous.items():
      signal.signal(s, handler)
    self._signal = None
    if self.workers > 1:
      self._request.assign(tf.zeros([self.workers]))

  def _on_signal(self, signum, frame):
    del frame
    self._signal = signal.Signals(signum).name

  def in_step(self, context):
    """What a replica adds to the step's all-reduce (None on one worker)."""
    return (self.from_one_replica_per_worker(self._request, context)
            if self.workers > 1 else None)

  def received(self, reduced):
    """The all-reduced requests of a step, kept (alike on every replica already: this
    worker's first copy, no further exchange)."""
    self._requests.assign(self.strategy.experimental_local_results(reduced)[0])

  def from_one_replica_per_worker(self, values, context):
    """`values` from this worker's first replica, zeros from its others: summed over
    replicas, each worker's count once."""
    first = self.worker * (self.strategy.num_replicas_in_sync // self.workers)
    return values * tf.cast(tf.equal(context.replica_id_in_sync_group, first),
                            values.dtype)

  def _summed_over_workers(self, values):
    """The sum over workers of each one's `values` (float32, the same shape on all): an
    exchange of its own, which returns only once every worker has made it."""
    per_replica = self.strategy.run(
        lambda: self.from_one_replica_per_worker(tf.identity(values),
                                                 tf.distribute.get_replica_context()))
    return self.strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

  def request(self):
    """On several workers, a signal this one took goes into the next step's exchange."""
    if self.workers > 1 and self._signal is not None:
      self._request[self.worker].assign(signal.Signals[self._signal].value)

  def stopped_by(self, at_end: bool) -> Dict[int, str]:
    """The signals that stop the run after this step, by the index of the worker that
    took each: on several workers, the ones every worker learned of in this step's
    exchange (so all stop at the same step)."""
    if self.workers == 1:
      return {0: self._signal} if self._signal is not None else {}
    requests = self._requests
    if at_end:  # one more exchange: a signal taken during the last step rode in none
      self.request()
      requests = self._sum_over_workers(self._request)
    return {worker: signal.Signals(int(number)).name
            for worker, number in enumerate(requests.numpy()) if number}

  def interrupted(self, stopped_by: Dict[int, str], step: int,
                  saved: str) -> TrainingInterrupted:
    """The error to stop with, once every worker has saved (the exchange that waits for
    all: a chief whose save failed never makes it, and the others then end as with a
    lost peer)."""
    if self.workers == 1:
      return TrainingInterrupted(f"{stopped_by[0]} at step {step}: saved {saved}; run "
                                 "the same command again to resume")
    self._sum_over_workers(self._request)
    signals = ", ".join(f"{name} on worker {worker}"
                        for worker, name in sorted(stopped_by.items()))
    return TrainingInterrupted(
        f"{signals} at step {step}: every worker stopped there and the chief saved "
        f"{saved}; run the same commands on every worker again to resume")
