"""A task family's declaration: everything the registry (finetune/tasks.py) needs of a
family, in one record its folder writes (family.py of sentence/, qa/, tagging/); and the
checks of users' task files the families share.

The record loads without TensorFlow (configs and --help stay fast): the runner is
imported when a run asks for it.
"""

import dataclasses
import functools
import os
from typing import Callable, Dict, Optional, Sequence, Tuple

from finetune.errors import DataError
from util.hparams import unknown_name_message


@dataclasses.dataclass(frozen=True)
class Family:
  name: str
  # A frozen dataclass with at least name, aliases, train_split, eval_splits,
  # test_splits and metrics.
  task_type: type
  # A split's examples (finetune/tasks.py read_examples): its file's path (task,
  # data_dir, split), a DataError when missing; the file read (task, path, split); else,
  # for a task with a tfds_name, TensorFlow Datasets' (task, split, builder).
  split_file: Callable[..., str]
  read_file: Callable[..., list]
  # () -> its TaskRunner subclass, imported only then (runners import TensorFlow).
  runner: Callable[[], type]
  read_tfds: Optional[Callable[..., list]] = None
  tasks: Tuple = ()  # its tasks by name (a user's tasks come from task files)
  # A frozen dataclass of the config fields its runner reads (hparams.field each, with
  # its rules and help): the section a run of its tasks holds (FinetuningConfig.sections);
  # each name unique among every family's and FinetuningConfig's.
  settings: Optional[type] = None
  # A user's task from its task file (finetune/tasks.py: a JSON object naming the
  # family, its "family" key left out): (path, object) -> the task.
  load_task_file: Optional[Callable[[str, dict], object]] = None


def read_once(read: Callable, path: str, *args):
  """read(path, *args), read again only when the file changes (a run loads its tasks
  several times)."""
  status = os.stat(path)
  return _read_version(read, path, status.st_mtime_ns, status.st_size, *args)


@functools.lru_cache(maxsize=16)
def _read_version(read, path, mtime_ns, size, *args):
  del mtime_ns, size  # the cache's key
  return read(path, *args)


def task_file_splits(path: str, spec: dict, keys: Sequence[str]) -> Dict[str, str]:
  """The paths of the split files (train, dev, test) a user's task file `path` names,
  each relative to it; a DataError for a key outside `keys`, a missing name or training
  file, or a split that names no file."""
  for key in spec:
    if key not in keys:
      raise DataError(f"{path}: " + unknown_name_message(key, keys, "task file key",
                                                         list_valid=True))
  for key in ("name", "train"):
    if not isinstance(spec.get(key), str) or not spec[key].strip():
      raise DataError(f'{path}: missing "{key}", a non-empty string')
  splits = {}
  for split in ("train", "dev", "test"):
    if split in spec:
      if not isinstance(spec[split], str) or not spec[split].strip():
        raise DataError(f'{path}: "{split}" must name its file, relative to the task file')
      splits[split] = os.path.join(os.path.dirname(os.path.abspath(path)), spec[split])
  return splits


def task_file_metrics(path: str, spec: dict, known, default) -> Tuple[str, ...]:
  """The metrics a user's task file `path` names ("metric", or a "metrics" list), each
  one of `known`; `default` (a list) when it names none."""
  names = spec.get("metrics", [spec["metric"]] if "metric" in spec else default)
  if not isinstance(names, list) or not names:
    raise DataError(f'{path}: "metrics" must be a non-empty list of metric names')
  for name in names:
    if name not in known:
      raise DataError(f"{path}: " + unknown_name_message(str(name), known, "metric",
                                                         list_valid=True))
  return tuple(names)
