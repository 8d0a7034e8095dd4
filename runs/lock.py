"""One run per model dir: a second run on a directory a live run holds is refused,
naming the holder; a multi-worker run's lock is its chief's."""

import contextlib
import json
import os
import shlex
import sys

import filelock

from util.files import atomic_write


class DirectoryInUse(ValueError):
  """Another live process holds the run lock of a directory."""


@contextlib.contextmanager
def run_lock(directory: str):
  """Holds the run lock of `directory` for the block; refuses it, naming the holder, if
  another process holds it. An OS file lock (flock) on a hidden file beside the
  directory (so deleting the directory to start over keeps it), which the OS releases
  when its process dies; a second file beside it names the holder."""
  path = os.path.realpath(directory)  # a link to a folder and the folder: one lock
  parent, name = os.path.split(path)
  lock_path = os.path.join(parent, f".{name}.lock")
  holder_path = lock_path + ".holder"
  made = []  # the folders made for the lock, innermost first
  folder = parent
  while not os.path.exists(folder):
    made.append(folder)
    folder = os.path.dirname(folder)
  os.makedirs(parent, exist_ok=True)
  # No fallback to a plain marker file where flock is missing: a killed run's marker
  # would block every later run.
  try:  # filelock reports an uncreatable lock file as held: say what failed instead
    open(lock_path, "a").close()
  except OSError as e:
    raise OSError(e.errno, e.strerror, directory) from None
  lock = filelock.FileLock(lock_path, blocking=False, fallback_to_soft=False)
  try:
    lock.acquire()
  except filelock.Timeout:
    holder = read_holder(holder_path)
    raise DirectoryInUse(
        f"{directory} is in use by another run ({holder or 'process unknown'}); wait for "
        "it to finish or stop it, or use another model_dir") from None
  try:
    stale = read_holder(holder_path)
    if stale:
      print(f"taking over the lock of {directory} from a run that ended without "
            f"releasing it ({stale})", flush=True)
    with atomic_write(holder_path) as f:
      # On one line: it goes into another run's one-line error.
      command = shlex.join(sys.orig_argv).replace("\n", "\\n")
      json.dump({"pid": os.getpid(), "command": command}, f)
    yield
  finally:
    with contextlib.suppress(FileNotFoundError):
      os.remove(holder_path)
    # A run that made nothing (refused, interrupted early) leaves nothing: its lock
    # file goes while held (a run that opened it meanwhile sees it unlinked and is
    # refused), and the folders made for it go if empty.
    if not os.path.exists(path):
      with contextlib.suppress(FileNotFoundError):
        os.remove(lock_path)
    lock.release()
    for folder in made:
      try:
        os.rmdir(folder)
      except OSError:  # not empty: something else was written there
        break


def read_holder(holder_path: str) -> str:
  """"pid N: command" from a run lock's holder file, or "" if there is none."""
  try:
    with open(holder_path, encoding="utf-8") as f:
      holder = json.load(f)
    return f"pid {holder['pid']}: {holder['command']}"
  except (OSError, ValueError, KeyError, TypeError):
    return ""


def run_dir_lock(distribution_strategy: str, directory: str):
  """run_lock(directory), taken by the chief only: the workers of a multi-worker
  run share its directory. Decided from TF_CONFIG, before any strategy exists."""
  if distribution_strategy == "multi_worker":
    try:
      cluster_config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    except ValueError as e:
      raise ValueError(f"TF_CONFIG is not valid JSON ({e})") from None
    task = cluster_config.get("task", {})
    chief = task.get("type") in (None, "chief") or (  # the one "chief", else worker 0
        task.get("type") == "worker" and task.get("index", 0) == 0
        and "chief" not in cluster_config.get("cluster", {}))
    if not chief:
      return contextlib.nullcontext()
  return run_lock(directory)
