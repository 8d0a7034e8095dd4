"""An export folder, written whole or not at all: filled at a temporary name beside its
destination (locked while its process lives) and renamed into place when whole."""

import contextlib
import fcntl
import os
import shutil
import tempfile
from typing import Callable

from util.files import make_folder

# A file inside an export's temporary folder, locked (flock) while its process lives: a
# folder whose lock can be taken is left by an export that was killed.
IN_PROGRESS = ".export_in_progress"


def write_new(output: str, fill: Callable[[str, Callable[[str], None]], None], log=print):
  """Calls fill(tmp, doing) to write the folder's files into tmp, telling doing(what)
  what it writes (for the message of a failed write), then renames tmp to `output`."""
  parent = os.path.dirname(os.path.abspath(output))
  make_folder(parent, output)
  remove_stale_exports(parent, log)
  tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(output)}.", dir=parent)
  umask = os.umask(0)
  os.umask(umask)
  os.chmod(tmp, 0o777 & ~umask)  # mkdtemp's is 0700; the folder gets the usual one
  state = {"doing": "starting"}

  def doing(what: str):
    state["doing"] = what
  try:
    with _in_progress(tmp) as finish:
      fill(tmp, doing)
      doing("renaming the finished folder into place")
      finish(output)
  except OSError as e:
    shutil.rmtree(tmp, ignore_errors=True)
    if e.filename is not None and not e.filename.startswith(tmp):
      raise  # an input's, named
    # A write's error names no file (a full disk: "File too large"), or one in the
    # temporary folder: say what was being written, and that nothing was left.
    what = (f"writing {os.path.relpath(e.filename, tmp)}" if e.filename is not None
            else state["doing"])
    raise OSError(e.errno, f"{e.strerror or e} ({what}); nothing was written "
                  "(the partial export was removed)", output) from None
  except BaseException:
    shutil.rmtree(tmp, ignore_errors=True)
    raise


def write_file(path: str, data: bytes):
  """Writes `data` to `path`; a failed write names the file (a full disk's error names
  none)."""
  try:
    with open(path, "wb") as f:
      f.write(data)
  except OSError as e:
    if e.filename is None:
      e.filename = path
    raise


@contextlib.contextmanager
def _in_progress(tmp: str):
  """Holds `tmp`'s lock for the block; yields finish(output), which renames the whole
  folder into place, then takes the lock file out of it."""
  with open(os.path.join(tmp, IN_PROGRESS), "w", encoding="utf-8") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)

    def finish(output: str):
      # Renamed first, released after: a later export never finds this folder both
      # unlocked and still at its temporary name.
      os.rename(tmp, output)
      os.remove(os.path.join(output, IN_PROGRESS))
    yield finish


def remove_stale_exports(parent: str, log=print):
  """Removes the temporary folders that killed exports left in `parent` (their lock
  free), saying so."""
  for entry in os.listdir(parent):
    folder = os.path.join(parent, entry)
    marker = os.path.join(folder, IN_PROGRESS)
    if not entry.startswith(".") or not os.path.isfile(marker):
      continue
    try:
      with open(marker, encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        shutil.rmtree(folder, ignore_errors=True)
    except OSError:  # held: a live export's; or gone meanwhile
      continue
    log(f"removed {folder}, the temporary folder of an export that was stopped before "
        "it finished")
