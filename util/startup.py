"""The environment TensorFlow reads as it loads, and what every command's start shares
(Ctrl-C and SIGTERM in one line, no "failed call to cuInit" line without a GPU); every
command imports this first. Library rooms never import it: a program that embeds them
keeps its own settings."""

import gc
import glob
import importlib.abc
import importlib.util
import os
import signal
import sys

from util import cli, cpu, stderr

# TensorFlow's start-up chatter; with TF_CONFIG (a multi-worker run) its error lines too:
# a lost peer is several raw gRPC lines on every survivor, which the training loop's one
# line replaces (training/loop.py).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3" if "TF_CONFIG" in os.environ else "2")
# tf.keras is then tf_keras (Keras 2, what this project and tf-models-official build
# on); otherwise TensorFlow also imports Keras 3 as it loads, which every command's
# start pays for (bench/RESULTS.md, "Start-up").
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
# Python's cyclic collector runs after every 700 new objects by default, and loading
# TensorFlow makes millions that live as long as the command: collected less often,
# importing TensorFlow takes less CPU (bench/RESULTS.md, "Start-up"). Garbage in cycles
# is still collected, in larger batches.
gc.set_threshold(50_000, 20, 20)
# oneDNN on where TensorFlow would leave it off but it measures faster (util/cpu.py),
# unless the user set TF_ENABLE_ONEDNN_OPTS; `python -m tools.cpu` says why.
try:
  ONEDNN_CHOICE = cpu.onednn_choice(cpu.cpu_info())
except ValueError as e:  # a bad ELECTRA_ASSUME_CPU
  print(f"error: {e}", file=sys.stderr)
  sys.exit(cli.EXIT_ERROR)
if ONEDNN_CHOICE is not None:
  os.environ[cpu.ONEDNN_ENV] = ONEDNN_CHOICE


def _interrupted_while_starting(kind, value, traceback):
  """Ctrl-C or SIGTERM outside the commands' cli.run_command (while modules load): one
  line."""
  if issubclass(kind, KeyboardInterrupt):
    print(f"interrupted: {str(value) or 'Ctrl-C'} (while starting: nothing was done)",
          file=sys.stderr)
    sys.stderr.flush()
    os._exit(cli.EXIT_INTERRUPTED)  # pylint: disable=protected-access
  sys.__excepthook__(kind, value, traceback)


def has_gpu() -> bool:
  """Whether this machine shows an NVIDIA device (or WSL's GPU), without TensorFlow."""
  return bool(glob.glob("/dev/nvidia[0-9]*") or os.path.exists("/dev/dxg"))


def probe_devices_quietly(tf):
  """Has TensorFlow look for GPUs now (it does so once per process), with its
  "failed call to cuInit" line left out of what it writes to stderr."""
  with stderr.without_lines(stderr.NO_GPU_LINE, stderr.ABSL_FIRST_LINE):
    tf.config.list_physical_devices("GPU")


class _AfterTensorFlowLoads(importlib.abc.MetaPathFinder):
  """Runs probe_devices_quietly once `tensorflow` has been imported (by anything)."""

  def find_spec(self, name, path=None, target=None):
    if name != "tensorflow":
      return None
    sys.meta_path.remove(self)  # the real finders find it; this only wraps its loading
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
      return spec
    load = spec.loader.exec_module

    def exec_module(module):
      load(module)
      probe_devices_quietly(module)
    spec.loader.exec_module = exec_module
    return spec


def _terminated(signum, frame):
  """SIGTERM from start-up to exit ends as Ctrl-C does, in one line, its lock released
  (a training run holds a handler of its own, which saves first:
  training/stopping.py)."""
  del frame
  raise cli.Terminated(signal.Signals(signum).name)


def _pool_worker() -> bool:
  """Whether this process is a multiprocessing pool's worker (data_prep's build spawns
  them, and they import the command's modules before they work)."""
  multiprocessing = sys.modules.get("multiprocessing")
  return bool(multiprocessing) and multiprocessing.current_process().name != "MainProcess"


sys.excepthook = _interrupted_while_starting
# Not in a pool's worker: its pool ends it with SIGTERM, which must end it at once; a
# Python handler runs only when its main thread wakes, and one blocked in a lock that
# another thread took the signal for never would.
if not _pool_worker():
  signal.signal(signal.SIGTERM, _terminated)
if not has_gpu() and "tensorflow" not in sys.modules:
  sys.meta_path.insert(0, _AfterTensorFlowLoads())
