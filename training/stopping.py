"""SIGINT/SIGTERM during a run: never lost, whatever the run is doing when one comes.

The run holds the handler from its start to its end (`held`). During a loop's steps a
signal waits for the step's end, and the loop saves, then stops; on several workers a
signal to any one stops them all after the same step: each worker's request (the number
of the signal it took, at its index) rides in the step's gradient all-reduce, so every
worker learns of it at no extra exchange. Anywhere else (reading data, an evaluation,
an export, between epochs or trials) everything trained is saved already: the signal
stops the run at once, as Ctrl-C stops a command, and its line names the last save.
"""

import contextlib
import signal
from typing import Dict, Optional

import tensorflow as tf

from util import cli, stderr


class TrainingInterrupted(cli.Interrupted):
  """SIGINT/SIGTERM arrived; a checkpoint was saved first (see `message`)."""


class _Process:
  """What the handler keeps (a signal is the process's, whichever loop runs)."""
  in_steps = False  # a loop's steps run: a signal waits for the step's end
  taken: Optional[str] = None  # the signal they took
  saved = ""  # the last save a loop made or resumed from, as the one line names it


def _on_signal(signum, frame):
  del frame
  name = signal.Signals(signum).name
  if _Process.in_steps:
    _Process.taken = name
    return
  # The process ends: TensorFlow's warnings about the work cut short (a restore's
  # values left unread, as the restore is collected) would follow the one line.
  tf.get_logger().setLevel("ERROR")
  stop = cli.Terminated if signum == signal.SIGTERM else KeyboardInterrupt
  raise stop(f"{name} after {_Process.saved}; run the same command again to resume"
             if _Process.saved else name)


@contextlib.contextmanager
def held():
  """A run, from its start to its end, in which this module takes SIGINT and SIGTERM
  (in such a block already: nothing more)."""
  if signal.getsignal(signal.SIGTERM) is _on_signal:
    yield
    return
  _Process.taken, _Process.saved = None, ""
  previous = {s: signal.signal(s, _on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
  try:
    yield
  finally:
    for s, handler in previous.items():
      signal.signal(s, handler)


def save_deleted():
  """The run deleted its last save (a trial's model it does not keep): a stop from now
  names none, until a loop saves again."""
  _Process.saved = ""


class StopRequests:
  """The signals a run took: a loop's steps run as a block (`with`) in which a signal
  waits for the step's end; one taken after the last step's check stops the run as the
  block ends."""

  def __init__(self, strategy, worker: int, workers: int):
    self.strategy, self.worker, self.workers = strategy, worker, workers
    self.last_save = (0, "")
    if workers > 1:
      # This worker's request, and the sum over workers a step's all-reduce carries.
      self._request = tf.Variable(tf.zeros([workers]), trainable=False,
                                  name="stop_request")
      self._requests = tf.Variable(tf.zeros([workers]), trainable=False,
                                   name="stop_requests")
      self._sum_over_workers = tf.function(self._summed_over_workers, autograph=False)

  def __enter__(self):
    _Process.in_steps = True
    return self

  def __exit__(self, kind, *_):
    _Process.in_steps = False
    # One more exchange: a signal taken during the last step, or after its check (in
    # the last save), rode in none.
    stopped_by = self.stopped_by(exchange=True) if kind is None else {}
    if self.workers > 1:
      self._request.assign(tf.zeros([self.workers]))
    if stopped_by:
      raise self.interrupted(stopped_by)

  def saved(self, step: int, path: str):
    """The loop's last save (or the checkpoint it resumed from), which a stop names."""
    self.last_save = step, path
    _Process.saved = f"step {step} (saved {path})"

  def in_step(self, context):
    """What a replica adds to the step's all-reduce (None on one worker): this worker's
    request from its first replica, zeros from its others, so that the sum over replicas
    counts each worker's once."""
    if self.workers == 1:
      return None
    first = self.worker * (self.strategy.num_replicas_in_sync // self.workers)
    return self._request * tf.cast(tf.equal(context.replica_id_in_sync_group, first),
                                   tf.float32)

  def received(self, reduced):
    """The all-reduced requests of a step, kept (alike on every replica already: this
    worker's first copy, no further exchange)."""
    self._requests.assign(self.strategy.experimental_local_results(reduced)[0])

  def _summed_over_workers(self):
    """The sum over workers of their requests: an exchange of its own, which returns
    only once every worker has made it."""
    per_replica = self.strategy.run(
        lambda: self.in_step(tf.distribute.get_replica_context()))
    return self.strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

  def request(self):
    """On several workers, a signal this one took goes into the next step's exchange."""
    if self.workers > 1 and _Process.taken is not None:
      self._request[self.worker].assign(signal.Signals[_Process.taken].value)

  def stopped_by(self, exchange: bool = False) -> Dict[int, str]:
    """The signals that stop the run after this step, by the index of the worker that
    took each: on several workers, the ones every worker learned of in this step's
    exchange (so all stop at the same step), or in one more (`exchange`)."""
    if self.workers == 1:
      return {0: _Process.taken} if _Process.taken is not None else {}
    requests = self._requests
    if exchange:
      self.request()
      requests = self._sum_over_workers()
    return {worker: signal.Signals(int(number)).name
            for worker, number in enumerate(requests.numpy()) if number}

  def interrupted(self, stopped_by: Dict[int, str]) -> TrainingInterrupted:
    """The error to stop with, naming the last save, once every worker has saved (the
    exchange that waits for all: a chief whose save failed never makes it, and the
    others then end as with a lost peer)."""
    step, saved = self.last_save
    if self.workers == 1:
      return TrainingInterrupted(f"{stopped_by[0]} at step {step}: saved {saved}; run "
                                 "the same command again to resume")
    self._sum_over_workers()
    # The chief may be gone from here on, and with it the cluster's coordination
    # service: TensorFlow's lines about its lost heartbeats would follow the one line.
    stderr.python_lines_only()
    signals = ", ".join(f"{name} on worker {worker}"
                        for worker, name in sorted(stopped_by.items()))
    return TrainingInterrupted(
        f"{signals} at step {step}: every worker stopped there and the chief saved "
        f"{saved}; run the same commands on every worker again to resume")
