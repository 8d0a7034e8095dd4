"""The task registry: every fine-tuning task by its TFDS-style name and its aliases.

`get_task("glue/sst2")`, `get_task("sst")` (the original's name) and
`get_task("my_task.json")` (a user's task description) return task definitions;
`get_tasks("glue/mrpc,glue/rte")` reads a comma-separated list as the original's
multi-task runs take it; `read_examples(task, data_dir, split)` reads any task's split;
`runner_for(task, ...)` is the runner of its family. Per-task hyperparameter defaults
live in configs/finetuning/task_defaults.json.
"""

import os
from typing import Dict, List, Optional, Union

from finetune.errors import DataError
from finetune.qa import data as qa_data
from finetune.qa.runner import QARunner
from finetune.runner import TaskRunner
from finetune.sentence import data as sentence_data
from finetune.sentence.runner import SentenceRunner
from finetune.tagging import data as tagging_data
from finetune.tagging.runner import TaggingRunner
from util.hparams import load_preset, unknown_name_message

Task = Union[sentence_data.SentenceTask, qa_data.QATask, tagging_data.TaggingTask]

REGISTRY = {task.name: task for task in (*sentence_data.GLUE_TASKS, *qa_data.QA_TASKS,
                                         tagging_data.CHUNKING)}
ALIASES = {alias: task.name for task in REGISTRY.values() for alias in task.aliases}


def read_examples(task: Task, data_dir: str, split: str,
                  max_examples: Optional[int] = None,
                  tfds_data_dir: Optional[str] = None, fetch_missing: bool = False) -> list:
  """The examples of one split of any task (the first `max_examples`, for debug runs).

  Files under <data_dir>/finetuning_data come first; a GLUE or SQuAD task missing there
  is read from TensorFlow Datasets when it is prepared in `tfds_data_dir` or, with
  `fetch_missing`, once TFDS has downloaded and prepared it there.
  """
  if isinstance(task, sentence_data.SentenceTask):
    return sentence_data.read_examples(task, data_dir, split, max_examples,
                                        tfds_data_dir, fetch_missing)
  if isinstance(task, qa_data.QATask):
    return qa_data.read_examples(task, data_dir, split, tfds_data_dir,
                            fetch_missing)[:max_examples]
  return tagging_data.read_examples(task, data_dir, split)[:max_examples]


def get_task(name: str) -> Task:
  """A registered task by canonical name or alias, or a user's task from a .json path."""
  name = name.strip()
  if name.endswith(".json"):
    return sentence_data.load_custom_task(name)
  name = ALIASES.get(name, name)
  if name not in REGISTRY:
    raise DataError(unknown_name_message(name, list(REGISTRY) + list(ALIASES), "task") +
                    " (a user's task is given as the path of its .json description)")
  return REGISTRY[name]


def get_tasks(names: Union[str, List[str]]) -> List[Task]:
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


def data_paths(task: Task, data_dir: str) -> Dict[str, str]:
  """Where a task's files are read from, by what names them: a user's task's split files,
  else the data dir's finetuning_data folder (an output must write over none)."""
  if getattr(task, "files_dir", None) is not None:
    return {f"the {split} file of task {task.name}":
            os.path.join(task.files_dir, layout.file_names[0])
            for split, layout in task.splits.items()}
  return {"--data-dir": os.path.join(data_dir, "finetuning_data")}


def task_defaults(tasks: List[Task]) -> Dict[str, object]:
  """Hyperparameter defaults of a single-task run (as the original, none for several)."""
  if len(tasks) != 1:
    return {}
  return dict(load_preset("finetuning", "task_defaults").get(tasks[0].name, {}))


RUNNERS = {sentence_data.SentenceTask: SentenceRunner, qa_data.QATask: QARunner,
           tagging_data.TaggingTask: TaggingRunner}


def runner_for(task: Task, config, tokenizer) -> TaskRunner:
  """The runner of a task's family, for a run's FinetuningConfig and Tokenizer."""
  for task_type, runner in RUNNERS.items():
    if isinstance(task, task_type):
      return runner(task, config, tokenizer)
  raise ValueError(f"task {task.name}: no fine-tuning runner for "
                   f"{type(task).__name__} tasks")
