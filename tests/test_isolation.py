"""The suite never reads or writes the working tree: each test runs in an empty folder of
its own, so the README's two commands pass in either order (the quick start fills the
checkout's data/, which the tests' default data dir "data" must not reach)."""

import os
import shutil
import subprocess
import sys

import pytest

from tests.helpers import ROOT, SHARED_DATA

# The quick start's vocabulary has 8,192 tokens asked for and 8,058 learned.
STRAY_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [
    f"stray{i}" for i in range(8053)]


def test_each_test_runs_in_an_empty_folder_of_its_own():
  cwd = os.path.realpath(os.getcwd())
  assert not (cwd + os.sep).startswith(os.path.realpath(ROOT) + os.sep)
  assert not os.listdir(cwd)
  assert os.environ["PYTHONPATH"].split(os.pathsep)[0] == ROOT  # for commands started


def files_under(folder):
  """{path: bytes} of every file under `folder`, Python's caches aside."""
  found = {}
  for parent, dirs, names in os.walk(folder):
    dirs[:] = [d for d in dirs if d != "__pycache__"]
    for name in names:
      path = os.path.join(parent, name)
      with open(path, "rb") as f:
        found[os.path.relpath(path, folder)] = f.read()
  return found


@pytest.mark.slow
def test_a_stray_data_folder_in_the_checkout_is_neither_read_nor_written(tmp_path):
  # A copy of the checkout, ../shared beside it, with the quick start's data/vocab.txt.
  copy = tmp_path / "checkout"
  shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(
      ".git", ".venv", "data", "__pycache__", ".pytest_cache"))
  if os.path.isdir(SHARED_DATA):
    os.symlink(os.path.dirname(SHARED_DATA), tmp_path / "shared")
  (copy / "data").mkdir()
  (copy / "data" / "vocab.txt").write_text("".join(t + "\n" for t in STRAY_TOKENS))
  env = {k: v for k, v in os.environ.items()
         if not k.startswith("PYTEST_") and k != "PYTHONPATH"}
  # From the checkout's root the stray vocabulary is what "data" means ...
  seen = subprocess.run(
      [sys.executable, "-c", "from pretrain.config import load_config; "
       "print(load_config('electra_small', 'data').vocab_size)"],
      cwd=copy, env=env, capture_output=True, text=True, check=False)
  assert seen.stdout == f"{len(STRAY_TOKENS)}\n", seen.stderr[-2000:]
  before = files_under(copy)
  # ... and the tests that build configs on "data" (the FLOPs counts' vocabulary of 10
  # and the presets' 30522) pass beside it, writing nothing there.
  run = subprocess.run(
      [sys.executable, "-m", "pytest", "-q", "-x", "-k",
       "original_totals or counted_by_hand or empty_folder", "tests/test_flops.py",
       "tests/test_isolation.py::test_each_test_runs_in_an_empty_folder_of_its_own"],
      cwd=copy, env=env, capture_output=True, text=True, check=False, timeout=600)
  assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
  assert files_under(copy) == before
