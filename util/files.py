"""Atomic file and directory writing (readers never see a half-written file or folder),
and the checks of a command's output paths."""

import contextlib
import errno
import os
import shutil
import tempfile
from typing import Dict, Optional, Sequence

import filelock


def make_folder(folder: str, output: str):
  """os.makedirs(folder) for writing `output`, refusing a file in the way by its name
  (makedirs says only "File exists" or "Not a directory", naming neither)."""
  try:
    os.makedirs(folder, exist_ok=True)
  except (FileExistsError, NotADirectoryError):
    blocking = folder
    while not os.path.exists(blocking):
      blocking = os.path.dirname(blocking)
    raise NotADirectoryError(errno.ENOTDIR, f"{blocking} is a file, not a folder",
                             output) from None


def check_folder_name(source: str, name: str, what: str):
  """Refuses (ValueError, naming `source`) a name that is not one plain folder name:
  joined to its parent, a path ("a/b", "..") or "" or "." would name another folder
  than `what`, the one it is meant to name."""
  if name in ("", ".", "..") or os.sep in name or (os.altsep and os.altsep in name):
    raise ValueError(f"{source} {name!r}: expected one plain folder name, {what} (no "
                     "path separators, not '', '.' or '..')")


@contextlib.contextmanager
def atomic_write(path: str, mode: str = "w", encoding: str = "utf-8"):
  """Yields a file object whose contents replace `path` only if the block succeeds.
  A device or a FIFO (or a link to one) is written through, as a shell's redirection
  writes it: a rename would replace it. A link to a file keeps pointing at the file
  written."""
  if os.path.isdir(path):  # found now, not as the temporary file's failed rename
    raise IsADirectoryError(errno.EISDIR, "is a directory; expected a file to write",
                            path)
  text = {} if "b" in mode else {"encoding": encoding}
  if os.path.exists(path) and not os.path.isfile(path):
    try:
      with open(path, mode, **text) as f:
        yield f
    except OSError as e:
      if e.filename is None:  # a write's error names no file (/dev/full's ENOSPC)
        e.filename = path
      raise
    return
  path = os.path.realpath(path) if os.path.islink(path) else path
  folder = os.path.dirname(os.path.abspath(path))
  make_folder(folder, path)
  try:
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp",
                               dir=folder)
  except OSError as e:  # name the file the caller writes, not the temporary one
    raise OSError(e.errno, e.strerror, path) from None
  try:
    with os.fdopen(fd, mode, **text) as f:
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


# A file inside an atomic directory's temporary folder, locked (filelock's OS lock, as
# runs/lock.py's) while its process lives: a temporary folder whose lock can be taken
# was left by a write that was killed.
IN_PROGRESS = ".write_in_progress"


@contextlib.contextmanager
def atomic_directory(path: str, temp_name: str = "", log=print, what: str = "a write"):
  """Yields a new directory beside `path` to write into; when the block succeeds it
  takes `path`'s place (an existing `path` is moved aside first and deleted once the
  new one is in), and when it fails it is deleted and `path` stays as it was.
  `temp_name`: the temporary directory's name (default a new hidden ".<name>.*").
  The temporary folders that killed writes left beside `path` go first, each said
  through `log` as `what`'s. A link to a folder keeps pointing at the folder written."""
  path = os.path.realpath(path)
  parent = os.path.dirname(path)
  make_folder(parent, path)
  remove_stale_folders(parent, log, what)
  if temp_name:
    tmp = os.path.join(parent, temp_name)
    os.makedirs(tmp)
  else:
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.", dir=parent)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)  # mkdtemp makes 0700; give the usual permissions
  old = None
  try:
    with filelock.FileLock(os.path.join(tmp, IN_PROGRESS), fallback_to_soft=False):
      yield tmp
      if os.path.lexists(path):
        old = tmp + ".old"
        os.replace(path, old)
      try:
        os.replace(tmp, path)
      except BaseException:
        if old:
          os.replace(old, path)
        raise
      # Renamed first, the lock released after: a later write never finds this folder
      # both unlocked and still at its temporary name.
      os.remove(os.path.join(path, IN_PROGRESS))
  except BaseException:
    shutil.rmtree(tmp, ignore_errors=True)
    raise
  if old:
    shutil.rmtree(old, ignore_errors=True)


def remove_stale_folders(parent: str, log=print, what: str = "a write"):
  """Removes the temporary folders that killed atomic_directory writes left in
  `parent` (their lock free), saying so."""
  for entry in os.listdir(parent):
    folder = os.path.join(parent, entry)
    marker = os.path.join(folder, IN_PROGRESS)
    if not os.path.isfile(marker):
      continue
    try:
      with filelock.FileLock(marker, blocking=False, fallback_to_soft=False):
        shutil.rmtree(folder, ignore_errors=True)
    except (filelock.Timeout, OSError):  # held: a live write's; or gone meanwhile
      continue
    log(f"removed {folder}, the temporary folder of {what} that was stopped before it "
        "finished")


def check_output(flag: str, output: str, inputs: Dict[str, str],
                 writes: Optional[Sequence[str]] = None, remedy: str = ""):
  """Refuses (ValueError) an output that would write over one of the same command's
  inputs ({flag: path}; an input directory stands for every file in it), compared as the
  files the paths resolve to. `output` is a file (a directory is refused), or with
  `writes` a directory receiving those names; `remedy`: what to do instead."""
  if writes is None and os.path.isdir(output):
    raise ValueError(f"{flag} {output}: is a directory; expected a file to write")
  targets = [output] if writes is None else [os.path.join(output, w) for w in writes]
  for target in targets:
    for source, given in inputs.items():
      if not given or not os.path.exists(given) or not os.path.exists(target):
        continue
      real = os.path.realpath(given)
      inside = os.path.isdir(real) and os.path.realpath(target).startswith(real + os.sep)
      if inside or os.path.samefile(target, given):
        what = "is" if target == output else f"would write over {target},"
        raise ValueError(f"{flag} {output} {what} an input of this command ({source}: "
                         f"{given}); {remedy or 'choose another ' + flag}")
