"""A phase's run-time set-up: strategy, precision, dropout seeds, the chief.

Both phases start the same way (`start_run`), so a setting means the same in each.
"""

import hashlib
import json
import os
import re
import resource
import signal
import sys
from typing import Dict, List, Optional, Tuple

import numpy as np
import tensorflow as tf
import tf_keras

from model.internals import configure_coordination_service
from training.settings import STRATEGIES, ScaleSettings
from util import cli, cpu, hparams, stderr


def start_run(settings: ScaleSettings, seed: int) -> tf.distribute.Strategy:
  """The strategy, then the precision policy and checkpointed dropout seeded by `seed`.
  Call it once, before TensorFlow runs anything: a multi-worker strategy must configure
  the runtime's collective ops before the runtime starts."""
  strategy = make_strategy(settings.distribution_strategy, settings.tpu_address,
                           settings.cluster_wait_seconds)
  tf_keras.mixed_precision.set_global_policy(settings.mixed_precision)
  use_checkpointed_dropout(seed)
  return strategy


class ClusterError(ValueError):
  """A multi-worker run's cluster did not form: a worker of TF_CONFIG never joined."""


def make_strategy(name: str, tpu_address: Optional[str] = None,
                  cluster_wait_seconds: int = ScaleSettings.cluster_wait_seconds
                  ) -> tf.distribute.Strategy:
  """The strategy a `distribution_strategy` flag names (multi_worker: see
  multi_worker_strategy); another with TF_CONFIG set is warned of, as it trains alone."""
  if os.environ.get("TF_CONFIG") and name != "multi_worker":
    print(f"warning: TF_CONFIG is set, but distribution_strategy is {name!r}: this "
          "process trains alone, not in TF_CONFIG's cluster; set "
          "\"distribution_strategy\": \"multi_worker\" to train with it, or unset "
          "TF_CONFIG", file=sys.stderr, flush=True)
  if name == "default":
    return tf.distribute.get_strategy()
  if name == "one_device":
    gpus = tf.config.list_logical_devices("GPU")
    return tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else "/cpu:0")
  if name == "mirrored":
    gpus = tf.config.list_logical_devices("GPU")
    # Without GPUs, mirror over the logical CPU devices (tests configure two).
    devices = [d.name for d in gpus] or [d.name for d in tf.config.list_logical_devices(
        "CPU")]
    return tf.distribute.MirroredStrategy(devices)
  if name == "multi_worker":
    if "TF_CONFIG" not in os.environ:
      raise ValueError("distribution_strategy 'multi_worker' needs the TF_CONFIG "
                       "environment variable (cluster and task of this worker)")
    return multi_worker_strategy(cluster_wait_seconds)
  if name == "tpu":
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu_address or "")
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)
  raise ValueError("distribution_strategy: " + hparams.unknown_name_message(
      name, STRATEGIES, "strategy") + f" (expected one of {', '.join(STRATEGIES)})")


def multi_worker_strategy(wait_seconds: int) -> tf.distribute.MultiWorkerMirroredStrategy:
  """TF_CONFIG's cluster as a MultiWorkerMirroredStrategy once every worker has joined,
  or a ClusterError naming the workers not heard from within `wait_seconds` (left to
  itself, the strategy waits an hour, silent, for a worker that never starts)."""
  resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
  cluster = resolver.cluster_spec()
  tasks = (cluster.num_tasks(resolver.task_type) if resolver.task_type in cluster.jobs
           else 0)
  if resolver.task_id is None or not 0 <= resolver.task_id < tasks:
    sizes = ", ".join(f"{cluster.num_tasks(job)} {job}{'s' * (cluster.num_tasks(job) > 1)}"
                      for job in cluster.jobs)
    raise ClusterError(
        f"TF_CONFIG's task index {json.dumps(resolver.task_id)} (type "
        f"{json.dumps(resolver.task_type)}) is not in its cluster of {sizes}"
        + (f" (indices 0 to {tasks - 1})" if tasks else "")
        + "; give each worker its own index in the cluster")
  configure_coordination_service(cluster, wait_seconds)
  with stderr.without_lines(stderr.ABSL_FIRST_LINE, stderr.GRPC_SERVER_LINE,
                            all_if_raised=True):
    try:
      strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
      # Its coordination service takes SIGTERM for a preemption notifier of its own,
      # which swallows it: back to the handler Python holds (training/stopping.py's).
      signal.signal(signal.SIGTERM, signal.getsignal(signal.SIGTERM))
      return strategy
    except tf.errors.DeadlineExceededError as e:
      waited_for = _worker_names(resolver, e.message) or _worker_names(resolver)
    # Raised past the except clause, which drops TensorFlow's error while its lines are
    # still taken out: the server it holds writes one more as it goes.
    raise ClusterError(
        f"the multi-worker cluster did not form within {wait_seconds} s: no word from "
        f"{', '.join(waited_for)}; start every worker of TF_CONFIG's cluster (or give "
        "them longer: \"cluster_wait_seconds\")")


def check_same_settings(strategy: tf.distribute.Strategy, signature: Dict):
  """Refuses, on every worker of a multi-worker run, settings that fix the trained
  weights (`signature`: what signs the phase's run) unlike another worker's, in one line
  naming each field that differs, its values and the workers. One exchange of a hash per
  field (every worker then knows which differ); a second, of those fields' values, only
  when some do."""
  workers = worker_position(strategy)[1]
  if workers == 1:
    return
  fields = _flattened(signature)
  names = sorted(fields)
  # 48 bits of each value's SHA-256: exact in float64, the collectives' widest type.
  hashes = [int.from_bytes(hashlib.sha256(fields[name].encode()).digest()[:6], "big")
            for name in names]
  try:
    table = _gathered(strategy, workers, np.array(hashes, np.float64))
    differ = [name for i, name in enumerate(names) if len(set(table[:, i])) > 1]
    if not differ:
      return
    mine = np.frombuffer(json.dumps([fields[name] for name in differ]).encode(), np.uint8)
    lengths = _gathered(strategy, workers, np.array([len(mine)], np.float64))[:, 0]
    padded = np.zeros(int(lengths.max()), np.float64)
    padded[:len(mine)] = mine
    values = [json.loads(row[:int(n)].astype(np.uint8).tobytes())
              for row, n in zip(_gathered(strategy, workers, padded), lengths)]
  except tf.errors.OpError as e:
    lost = lost_peer(e, strategy)
    if lost is None:
      raise
    raise ClusterError(f"lost {lost[0]} before the first step ({lost[1]}); see its own "
                       "error, then run the same commands on every worker again") from None
  raise ClusterError("the workers' settings differ: " + "; ".join(
      f"{name} " + ", ".join(f"{values[w][i]} on worker {w}" for w in range(workers))
      for i, name in enumerate(differ)) + "; give every worker the same settings")


def _flattened(values: Dict, prefix: str = "") -> Dict[str, str]:
  """{"model.hidden_size": "256", ...}: each field of nested dicts, its value as JSON."""
  flat = {}
  for name, value in values.items():
    if isinstance(value, dict):
      flat.update(_flattened(value, f"{prefix}{name}."))
    else:
      flat[prefix + name] = json.dumps(value, sort_keys=True)
  return flat


def _gathered(strategy, workers: int, row: np.ndarray) -> np.ndarray:
  """Every worker's `row` (one shape on all), by worker: [workers, len(row)]."""
  gather = tf.function(lambda row: strategy.gather(
      strategy.run(lambda: tf.identity(row)[None]), axis=0), autograph=False)
  gathered = gather(tf.constant(row)).numpy()
  return gathered[::len(gathered) // workers]


# A task as TensorFlow's errors name it: /job:worker/replica:0/task:1, /job:worker/task:1.
_TASK = re.compile(r"/job:(\w+)/(?:replica:\d+/)?task:(\d+)")
# What a collective op or the coordination service raises when a peer is gone (dead,
# frozen, unreachable), after the strategy has formed.
_PEER_ERRORS = (tf.errors.UnavailableError, tf.errors.DeadlineExceededError,
                tf.errors.AbortedError, tf.errors.CancelledError)
# The wrappers around the reason in such an error's first line.
_PEER_ERROR_PREFIX = re.compile(r"^(Collective ops is aborted by: |Error reported from "
                                r"\S+: )+")


def _worker_names(resolver, message: Optional[str] = None) -> List[str]:
  """The cluster's other workers that `message` names (every other one without a
  message), in order, once each, as "worker <index> (<address>)", the index as
  worker_position counts."""
  cluster = resolver.cluster_spec().as_dict()
  if message is None:
    tasks = [(job, task) for job in ("chief", "worker")
             for task in range(len(cluster.get(job, [])))]
  else:
    tasks = [(job, int(task)) for job, task in _TASK.findall(message)]
  names = []
  for job, task in tasks:
    if (job, task) != (resolver.task_type, resolver.task_id) and task < len(
        cluster.get(job, [])):
      index = task + (1 if job == "worker" and "chief" in cluster else 0)
      names.append(f"worker {index} ({cluster[job][task]})")
  return list(dict.fromkeys(names))


def lost_peer(error: tf.errors.OpError, strategy: tf.distribute.Strategy
              ) -> Optional[Tuple[str, str]]:
  """(the workers lost, TensorFlow's reason in a few words) when `error` is how a
  multi-worker run learns that a peer died, froze or became unreachable; None for any
  other error. The workers are named by index and address as far as the error tells
  (in a cluster of two, the other one), else "a peer worker"."""
  resolver = getattr(strategy, "cluster_resolver", None)
  if (not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) or not resolver
      or not isinstance(error, _PEER_ERRORS)):
    return None
  others = _worker_names(resolver)
  lost = _worker_names(resolver, error.message) or (others if len(others) == 1 else [])
  reason = _PEER_ERROR_PREFIX.sub("", cli.op_error_text(error)).rstrip(":")
  return " and ".join(lost) or "a peer worker", reason


def precision_note() -> Optional[str]:
  """On a CPU, the line about the run's precision there (util/cpu.py): bfloat16 would
  be faster, or the run's 16-bit policy is many times slower; None otherwise."""
  if tf.config.list_logical_devices("GPU"):
    return None
  return cpu.precision_note(tf_keras.mixed_precision.global_policy().name,
                            cpu.cpu_info())


def use_checkpointed_dropout(seed: int):
  """Dropout draws from tf.random.Generator variables, which checkpoints hold: Keras'
  default (legacy stateful ops) restarts its random stream in every process, so a
  resumed run would drop other units than an uninterrupted one."""
  tf_keras.backend.experimental.enable_tf_random_generator()
  tf_keras.utils.set_random_seed(seed)


def worker_position(strategy: tf.distribute.Strategy):
  """(this worker's index, number of workers) of a multi-worker run, the chief's index
  0; (0, 1) otherwise."""
  resolver = getattr(strategy, "cluster_resolver", None)
  if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) and resolver:
    cluster = resolver.cluster_spec().as_dict()
    workers = len(cluster.get("worker", [])) + len(cluster.get("chief", []))
    index = resolver.task_id + (1 if resolver.task_type == "worker" and "chief" in
                                cluster else 0)
    return index, max(1, workers)
  return 0, 1


def stateless_seed(*parts) -> tf.Tensor:
  """An int64 [2] seed that depends only on `parts` (ints or scalar tensors)."""
  seed = tf.constant([0, 0], tf.int64)
  for part in parts:
    seed = tf.random.experimental.stateless_fold_in(seed, tf.cast(part, tf.int64))
  return seed



# Dense float32 (bfloat16) FLOP/s of one accelerator, from its published figures: the
# fraction of peak a run reaches says how much of the hardware it uses (a CPU's:
# util/cpu.py).
GPU_PEAK_FLOPS = {  # name fragment: (float32, bfloat16/float16 tensor cores)
    "H100": (67e12, 989e12), "A100": (19.5e12, 312e12), "L4": (30.3e12, 121e12),
    "A10": (31.2e12, 125e12), "V100": (15.7e12, 125e12), "T4": (8.1e12, 65e12)}


def peak_flops(strategy: tf.distribute.Strategy, precision: str) -> float:
  """Peak FLOP/s of the devices a run trains on (known GPUs, or the CPU); 0 when not
  known (TPUs, unlisted GPUs)."""
  gpus = tf.config.list_logical_devices("GPU")
  if isinstance(strategy, tf.distribute.TPUStrategy):
    return 0.0
  if not gpus:  # every worker's CPU alike (mirrored logical CPUs share this one)
    return worker_position(strategy)[1] * cpu.cpu_peak_flops(precision)
  name = tf.config.experimental.get_device_details(
      tf.config.list_physical_devices("GPU")[0]).get("device_name", "")
  peak = next((p for key, p in GPU_PEAK_FLOPS.items() if key in name), (0.0, 0.0))
  return strategy.num_replicas_in_sync * peak[precision != "float32"]


def available_memory() -> Optional[float]:
  """Bytes this process may still take: the least of the machine's available memory,
  its address-space limit (ulimit -v) less what it maps already, and its cgroup's
  limit less its use; None when none is known."""
  limits = []
  meminfo = _read_fields("/proc/meminfo")
  if "MemAvailable" in meminfo:
    limits.append(meminfo["MemAvailable"] * 1024)
  soft, _ = resource.getrlimit(resource.RLIMIT_AS)
  mapped = _read_fields("/proc/self/status").get("VmSize")
  if soft != resource.RLIM_INFINITY and mapped is not None:
    limits.append(soft - mapped * 1024)
  try:
    with open("/sys/fs/cgroup/memory.max", encoding="utf-8") as f:
      cgroup_max = f.read().strip()
    with open("/sys/fs/cgroup/memory.current", encoding="utf-8") as f:
      cgroup_used = int(f.read().strip())
    if cgroup_max != "max":
      limits.append(int(cgroup_max) - cgroup_used)
  except (OSError, ValueError):
    pass
  return max(0, min(limits)) if limits else None


def _read_fields(path: str) -> Dict[str, int]:
  """"Name: <number> kB" lines of a /proc file as {name: number}; {} if unreadable."""
  fields = {}
  try:
    with open(path, encoding="utf-8") as f:
      for line in f:
        name, _, value = line.partition(":")
        if value.split() and value.split()[0].isdigit():
          fields[name] = int(value.split()[0])
  except OSError:
    pass
  return fields


def _gib(n: float) -> str:
  return f"{n / (1 << 30):,.1f} GiB"


# What a run too big for the machine's memory can change (both phases' names).
STEP_MEMORY_FIX = ("lower train_batch_size or max_seq_length, or set "
                   "\"gradient_accumulation_steps\" (the same update in smaller pieces) or "
                   "\"recompute\": true")


def check_step_memory(strategy: tf.distribute.Strategy, precision: str, memory,
                      available: Optional[float] = None):
  """Refuses a training step that the machine's memory cannot hold, and warns of one
  that takes most of it, saying the figures; `memory` (model/memory.py's StepMemory)
  is one replica's micro-batch. On CPUs only: a GPU's or TPU's memory is its own."""
  if tf.config.list_logical_devices("GPU") or isinstance(strategy,
                                                         tf.distribute.TPUStrategy):
    return
  available = available_memory() if available is None else available
  if available is None:
    return
  local = strategy.num_replicas_in_sync // worker_position(strategy)[1]
  # Mixed precision computes and keeps activations in 16 bits.
  activations = memory.activations * (1 if precision == "float32" else 0.5) * local
  attention = memory.attention * (1 if precision == "float32" else 0.5) * local
  need = activations + memory.weights * local + memory.runtime
  figures = (f"about {_gib(need)} (activations {_gib(activations)}, of which attention "
             f"{_gib(attention)}; weights, gradients and optimizer "
             f"{_gib(memory.weights * local)})")
  if need > available:
    raise hparams.HParamsError(f"a training step needs {figures} but this machine has "
                               f"{_gib(available)} available; {STEP_MEMORY_FIX}")
  if need > 0.8 * available:
    print(f"warning: a training step needs {figures} of the {_gib(available)} this "
          f"machine has available; if it is killed, {STEP_MEMORY_FIX}", file=sys.stderr,
          flush=True)
