"""Atomic file writing: readers never see a half-written file."""

import contextlib
import os
import tempfile


@contextlib.contextmanager
def atomic_write(path: str, mode: str = "w", encoding: str = "utf-8"):
  """Yields a file object whose contents replace `path` only if the block succeeds."""
  folder = os.path.dirname(os.path.abspath(path))
  os.makedirs(folder, exist_ok=True)
  try:
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp",
                               dir=folder)
  except OSError as e:  # name the file the caller writes, not the temporary one
    raise OSError(e.errno, e.strerror, path) from None
  try:
    with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": encoding})) as f:
      yield f
      f.flush()
      os.fsync(f.fileno())
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the usual permissions
    os.replace(tmp, path)
  except BaseException:
    with contextlib.suppress(FileNotFoundError):
      os.remove(tmp)
    raise
