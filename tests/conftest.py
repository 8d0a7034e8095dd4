"""The suite's set-up and fixtures: the project root on sys.path, the XLA cache, each test
in a folder of its own. Helpers that tests share are in helpers.py."""

import gc
import os
import shutil
import sys
import tempfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)
# The commands tests start run in the test's own folder (below), not the checkout: the
# path lets `python -m <module>` and `python -c` find the project from there.
os.environ["PYTHONPATH"] = os.pathsep.join(
    [ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
# XLA compiles the fused layers' islands (model/fused.py) anew for each shape in each
# process, a few CPU-seconds per model size. Kept on disk for the session (TensorFlow
# writes each atomically and checks it against its computation when loading it), each
# is compiled once: the pytest-xdist workers and the commands tests start inherit the
# folder with the environment, which TensorFlow reads as it loads.
XLA_CACHE_FLAG = "--tf_xla_persistent_cache_directory="
XLA_CACHE = None
if XLA_CACHE_FLAG not in os.environ.get("TF_XLA_FLAGS", ""):
  XLA_CACHE = tempfile.mkdtemp(prefix="electra-tests-xla-")
  os.environ["TF_XLA_FLAGS"] = " ".join(
      [os.environ.get("TF_XLA_FLAGS", ""), XLA_CACHE_FLAG + XLA_CACHE]).strip()

from util import startup  # pylint: disable=unused-import,wrong-import-position  # before TensorFlow

def reads_shared_models(module):
  """Whether a test module reads a model that export_helpers trains once per session
  (helpers.shared_folder): it imports one of the functions that return them."""
  export_helpers = sys.modules.get("tests.export_helpers")
  return export_helpers is not None and any(
      vars(module).get(name) is getattr(export_helpers, name)
      for name in export_helpers.SHARED_MODELS)


def pytest_collection_modifyitems(items):
  """The modules that read the session's shared models run first, then those holding a
  slow test (pytest.ini: learns, a whole study, the commands end to end), each module's
  tests still together and in order. pytest-xdist's worksteal gives each worker a contiguous half of
  this order (and an idle one later takes over the end of the other's): the first half
  then begins with every reader of a shared model, so one worker trains each model and
  its readers follow it there, while the other starts on independent tests instead of
  waiting on the model's lock (40-75 s of a worker's time each in a full run). The long
  tests come before short ones, which the idle worker can take over, instead of one
  worker finishing a long test alone at the end."""
  slow_modules = {item.module for item in items if item.get_closest_marker("slow")}
  readers = {module for module in {item.module for item in items}
             if reads_shared_models(module)}
  items.sort(key=lambda item: (item.module not in readers, item.module not in slow_modules))


def pytest_unconfigure(config):  # pylint: disable=unused-argument
  """The process that made the XLA cache (pytest-xdist's controller, or the one
  process) removes it once every worker is done."""
  if XLA_CACHE:
    shutil.rmtree(XLA_CACHE, ignore_errors=True)


def pytest_collection_finish(session):  # pylint: disable=unused-argument
  """What the imports left is frozen out of Python's cyclic collections (util.startup
  already makes them rarer, as in every command): TensorFlow, its graphs and the tests'
  models keep a few hundred thousand objects alive. Both together took 13% off the CPU
  time of four in-process test files (82 -> 71 CPU-seconds)."""
  gc.collect()
  gc.freeze()


@pytest.fixture(autouse=True)
def cwd_of_its_own(tmp_path_factory, monkeypatch):
  """Each test (and each command it starts) runs in a new empty folder: a relative path,
  such as the commands' and configs' default data dir "data", then never reaches the
  checkout's data/, which the quick start fills, and nothing is written there."""
  monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))


@pytest.fixture(autouse=True)
def float32_policy_after_each_test():
  """A run in mixed precision sets Keras' global policy: later tests must not inherit
  it (their models would compute in float16)."""
  yield
  if "tf_keras" in sys.modules:
    sys.modules["tf_keras"].mixed_precision.set_global_policy("float32")
