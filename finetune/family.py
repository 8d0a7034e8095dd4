"""A task family's declaration: everything the registry (finetune/tasks.py) needs of a
family, in one record its folder writes (family.py of sentence/, qa/, tagging/).

A family is its task type (a frozen dataclass with at least name, aliases, train_split,
eval_splits, test_splits and metrics), the tasks it names, its reader, its runner (the
TaskRunner of finetune/runner.py, which makes its head, loss, scores and serving
signature) and the config fields its runner reads (its section of a run's config). The record loads without
TensorFlow (configs and --help stay fast): the runner is imported when a run asks for
it.
"""

import dataclasses
from typing import Callable, Optional, Tuple


@dataclasses.dataclass(frozen=True)
class Family:
  name: str
  task_type: type
  # (task, data_dir, split, max_examples, tfds_data_dir, fetch_missing) -> examples: the
  # first max_examples (all when None) of a split.
  read_examples: Callable[..., list]
  # () -> its TaskRunner subclass, imported only then (runners import TensorFlow).
  runner: Callable[[], type]
  tasks: Tuple = ()  # its tasks by name (a user's tasks come from task files)
  # A frozen dataclass of the config fields its runner reads (hparams.field each, with
  # its rules): the section a run of its tasks holds (FinetuningConfig.section); each
  # name unique among every family's and FinetuningConfig's.
  settings: Optional[type] = None
  # (path, its JSON object) -> a user's task from its task file (finetune/tasks.py
  # get_task), one whose "family" names this one.
  load_task_file: Optional[Callable[[str, dict], object]] = None
