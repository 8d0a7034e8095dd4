"""An export folder, written whole or not at all (util/files.py's atomic_directory), and
a failed write's one line: what was being written, and that nothing was left."""

import os
from typing import Callable

from util.files import atomic_directory


def write_new(output: str, fill: Callable[[str, Callable[[str], None]], None], log=print):
  """Calls fill(tmp, doing) to write the folder's files into tmp, telling doing(what)
  what it writes (for the message of a failed write), then renames tmp to `output`."""
  state = {"doing": "starting", "tmp": None}

  def doing(what: str):
    state["doing"] = what
  try:
    with atomic_directory(output, log=log, what="an export") as tmp:
      state["tmp"] = tmp
      fill(tmp, doing)
      doing("renaming the finished folder into place")
  except OSError as e:
    tmp = state["tmp"]
    if tmp is None or e.filename is not None and not str(e.filename).startswith(tmp):
      raise  # an input's, named, or the folder's parent's
    # A write's error names no file (a full disk: "File too large"), or one in the
    # temporary folder: say what was being written, and that nothing was left.
    what = (f"writing {os.path.relpath(e.filename, tmp)}" if e.filename is not None
            else state["doing"])
    raise OSError(e.errno, f"{e.strerror or e} ({what}); nothing was written "
                  "(the partial export was removed)", output) from None


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
