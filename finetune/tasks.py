"""The task registry: the task families (FAMILIES, `register`), and every task by its
TFDS-style name, its aliases (the original's names: "sst") or, a user's, the path of its
task file. Per-task hyperparameter defaults live in
configs/finetuning/task_defaults.json. Loads without TensorFlow.
"""

import json
import os
from typing import Dict, List, Optional, Union

from finetune import tfds_source
from finetune.errors import DataError
from finetune.family import Family
from finetune.qa import family as qa
from finetune.sentence import family as sentence
from finetune.tagging import family as tagging
from util.hparams import HParamsError, load_json, load_preset, unknown_name_message

# The shipped families; their settings are FinetuningConfig's sections
# (finetune/config.py).
FAMILIES: List[Family] = [sentence.FAMILY, qa.FAMILY, tagging.FAMILY]


def register(family: Family):
  """Adds a family (from a module of its own: a user's, a test's), its settings a
  section of the runs of its tasks as a shipped family's are."""
  if any(known.name == family.name for known in FAMILIES):
    raise ValueError(f"a task family named {family.name!r} is registered already")
  taken = set(_named()) | set(_aliases())
  clashing = [name for task in family.tasks for name in (task.name, *task.aliases)
              if name in taken]
  if clashing:
    raise ValueError(f"family {family.name}: task name {clashing[0]!r} is taken")
  FAMILIES.append(family)


def _named() -> Dict[str, object]:
  return {task.name: task for family in FAMILIES for task in family.tasks}


def _aliases() -> Dict[str, str]:
  return {alias: task.name for family in FAMILIES for task in family.tasks
          for alias in task.aliases}


def family_of(task) -> Family:
  """The family that declares `task`'s type; a DataError when none does."""
  for family in FAMILIES:
    if type(task) is family.task_type:  # pylint: disable=unidiomatic-typecheck
      return family
  raise DataError(f"task {getattr(task, 'name', task)!r}: no task family declares its "
                  f"type {type(task).__name__} (finetune/tasks.py FAMILIES, register)")


def read_examples(task, data_dir: str, split: str, tfds_data_dir: Optional[str] = None,
                  fetch_missing: bool = False) -> list:
  """The examples of one split of any task: its file (under <data_dir>/finetuning_data,
  or a user's task's own), else TFDS's (finetune/tfds_source.py files_else_tfds)."""
  family = family_of(task)
  return tfds_source.files_else_tfds(
      lambda: family.split_file(task, data_dir, split),
      lambda path: family.read_file(task, path, split),
      lambda builder: family.read_tfds(task, split, builder),
      getattr(task, "tfds_name", None), tfds_data_dir, fetch_missing)


# A user's task is given as the path of its task file, a JSON object.
TASK_FILE_SUFFIX = ".json"
# The family of a task file without a "family" key (the first files had none).
DEFAULT_TASK_FILE_FAMILY = "sentence"


def is_task_file(name: str) -> bool:
  """Whether `name` is the path of a user's task file rather than a task's name."""
  return name.strip().endswith(TASK_FILE_SUFFIX)


def load_task_file(path: str):
  """A user's task from its task file, by the family its "family" key names."""
  try:
    with open(path, encoding="utf-8") as f:
      spec = load_json(f.read(), path)
  except HParamsError as e:
    raise DataError(str(e)) from None
  except json.JSONDecodeError as e:
    raise DataError(f"{path}:{e.lineno}: invalid JSON: {e.msg}") from None
  except OSError as e:
    raise DataError(f"{path}: cannot read the task description ({e.strerror})") from None
  except UnicodeDecodeError as e:
    raise DataError(f"{path}: not UTF-8 text (byte {e.start}); expected the task's "
                    "JSON description") from None
  if not isinstance(spec, dict):
    raise DataError(f"{path}: expected a JSON object describing the task")
  name = spec.pop("family", DEFAULT_TASK_FILE_FAMILY)
  readers = {family.name: family for family in FAMILIES if family.load_task_file}
  if not isinstance(name, str) or name not in readers:
    raise DataError(f"{path}: \"family\": " + unknown_name_message(
        str(name), list(readers), "task family", list_valid=True))
  return readers[name].load_task_file(path, spec)


def get_task(name: str):
  """A registered task by canonical name or alias, or a user's task from its file."""
  name = name.strip()
  if is_task_file(name):
    return load_task_file(name)
  named, aliases = _named(), _aliases()
  name = aliases.get(name, name)
  if name not in named:
    raise DataError(unknown_name_message(name, list(named) + list(aliases), "task") +
                    f" (a user's task is given as the path of its {TASK_FILE_SUFFIX} "
                    "task file)")
  return named[name]


def get_tasks(names: Union[str, List[str]]) -> list:
  """Tasks from "a,b,c" or a list; the same task twice is an error."""
  if isinstance(names, str):
    names = [n for n in names.split(",") if n.strip()]
  tasks = [get_task(n) for n in names]
  seen = set()
  for task in tasks:
    if task.name in seen:
      raise DataError(f"task {task.name} is listed twice")
    seen.add(task.name)
  if not tasks:
    raise DataError("no task given")
  return tasks


def data_paths(task, data_dir: str) -> Dict[str, str]:
  """Where a task's files are read from, by what names them: a user's task's split files,
  else the data dir's finetuning_data folder (an output must write over none)."""
  if getattr(task, "files", None):
    return {f"the {split} file of task {task.name}": path
            for split, path in task.files.items()}
  return {"--data-dir": os.path.join(data_dir, "finetuning_data")}


def task_defaults(tasks: list) -> Dict[str, object]:
  """Hyperparameter defaults of a single-task run (as the original, none for several)."""
  if len(tasks) != 1:
    return {}
  return dict(load_preset("finetuning", "task_defaults").get(tasks[0].name, {}))


def runner_for(task, config, tokenizer):
  """The TaskRunner of a task's family, for a run's FinetuningConfig and Tokenizer."""
  return family_of(task).runner()(task, config, tokenizer)
