"""Shared test fixtures: the project root on sys.path and ../shared/data; each test in a
folder of its own."""

import contextlib
import gc
import os
import shutil
import subprocess
import sys
import tempfile

import filelock
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DATA = os.path.join(os.path.dirname(ROOT), "shared", "data")
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

def pytest_collection_modifyitems(items):
  """Modules holding a slow test (pytest.ini: learns something, or a whole study) run
  first, each module's tests still together and in order: pytest-xdist's worksteal then
  has the two workers begin on the long tests and end on short ones, which the idle one
  can take over, instead of one worker finishing a long test alone at the end."""
  slow_modules = {item.module for item in items if item.get_closest_marker("slow")}
  items.sort(key=lambda item: item.module not in slow_modules)


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


def shared_path(*parts: str) -> str:
  """Path under ../shared/data; a test that needs it fails in CI and skips elsewhere."""
  path = os.path.join(SHARED_DATA, *parts)
  if not os.path.exists(path):
    if os.environ.get("CI"):
      pytest.fail(f"{path} is missing: CI must run with ../shared beside the checkout")
    pytest.skip(f"{path} is missing (../shared/data not beside the checkout)")
  return path


def shared_folder(tmp_path_factory, name, make):
  """The folder <name>, filled once per test session by make(folder) for every test that
  only reads it, whichever pytest-xdist worker asks first (the workers' temp folders
  share a parent; a file lock makes the others wait for it)."""
  root = tmp_path_factory.getbasetemp()
  if os.environ.get("PYTEST_XDIST_WORKER"):
    root = root.parent
  home = root / name
  done = root / f"{name}.done"
  with filelock.FileLock(f"{home}.lock"):
    if not done.exists():
      shutil.rmtree(home, ignore_errors=True)  # a run killed while making it
      home.mkdir()
      make(home)
      done.write_text("")
  return home


def write_tiny_pretrained_model(data, layers=2):
  """<data>/vocab.txt (BERT's) and a tiny random model named "tiny" of `layers`
  transformer layers, exported where run_pretraining.py exports
  (<data>/models/tiny/export/), for fine-tuning tests."""
  from model.config import ModelConfig  # pylint: disable=g-import-not-at-top
  from model.electra import ElectraPair  # pylint: disable=g-import-not-at-top
  from model.weights.original import save_original  # pylint: disable=g-import-not-at-top
  with open(shared_path("vocab", "bert_uncased_vocab.txt"), "rb") as f:
    (data / "vocab.txt").write_bytes(f.read())
  config = ModelConfig.from_dict(dict(vocab_size=30522, hidden_size=32,
                                      num_hidden_layers=layers, embedding_size=16,
                                      max_position_embeddings=128))
  save_original(ElectraPair(config).build_variables(),
                str(data / "models" / "tiny" / "export" / "model.ckpt"))


@contextlib.contextmanager
def run_lock_held_elsewhere(directory):
  """Yields the Popen of another process holding `directory`'s run lock (as a live run
  does, through util.files.run_lock); kills it (SIGKILL, no clean-up) on exit."""
  code = ("import sys, time\nfrom util import files\nwith files.run_lock(sys.argv[1]):\n"
          "  print('held', flush=True)\n  time.sleep(600)\n")
  holder = subprocess.Popen([sys.executable, "-c", code, str(directory)],
                            stdout=subprocess.PIPE, text=True)
  try:
    assert holder.stdout.readline() == "held\n"
    yield holder
  finally:
    holder.kill()
    holder.wait()
    holder.stdout.close()
