"""Fine-tuning hyperparameters: one object, the original's names and defaults.

Defaults are the original's `FinetuningConfig`; configs/finetuning/<size>.json overrides
them per model size (the paper's learning rates and layer-wise decay), per-task defaults
(configs/finetuning/task_defaults.json) follow for single-task runs, and --hparams
overrides everything. Paths follow the original data-dir layout:
<data_dir>/finetuning_data/<task>/, <data_dir>/models/<model_name>/ (pre-trained weights
and vocab.txt), results in <data_dir>/models/<model_name>/results/<tasks>_results.txt.
"""

import dataclasses
import functools
import os
from typing import Any, Callable, Dict, List, Optional

from finetune import tasks as task_registry
from model.config import INIT_ADJUSTMENTS, ModelChoice, ModelConfig
from util import hparams
from training.settings import ScaleSettings


@dataclasses.dataclass(frozen=True)
class FinetuningConfig(*(family.settings for family in task_registry.FAMILIES
                         if family.settings), ScaleSettings, ModelChoice):
  """Every field of a fine-tuning run: these, the hardware's (ScaleSettings), the
  model's (ModelChoice) and each task family's own (finetune/<family>/family.py)."""
  model_name: str = hparams.field("electra_small", resumable=True)
  data_dir: str = hparams.field("data", resumable=True)
  task_names: List[str] = dataclasses.field(default_factory=lambda: ["glue/sst2"])
  # Quick checks: 100 examples per split and, unless init_checkpoint is given, a tiny
  # random model.
  debug: bool = False
  num_trials: int = hparams.field(1, at_least=1, resumable=True)
  do_train: bool = hparams.field(True, resumable=True)
  do_eval: bool = hparams.field(True, resumable=True)
  # False: delete each trial's model once it is scored.
  keep_all_models: bool = hparams.field(True, resumable=True)
  # Each kept trial's model also as a serving SavedModel (finetune/serving.py); a study
  # that wants only scores turns it off (the export is about a third of a small run).
  export_serving: bool = True
  seed: int = hparams.field(0, at_least=0)

  # Training.
  learning_rate: float = hparams.field(1e-4, above=0)
  weight_decay_rate: float = hparams.field(0.01, at_least=0)
  layerwise_lr_decay: float = hparams.field(0.8, above=0, at_most=1)
  num_train_epochs: float = hparams.field(3.0, above=0)
  warmup_proportion: float = hparams.field(0.1, at_least=0, at_most=1)
  save_checkpoints_steps: int = hparams.field(1000000, at_least=1, resumable=True)
  log_every_steps: int = hparams.field(50, at_least=1, resumable=True)
  write_test_outputs: bool = hparams.field(False, resumable=True)
  n_writes_test: int = hparams.field(5, at_least=0, resumable=True)

  # Sizing.
  max_seq_length: int = hparams.field(128, at_least=1)
  train_batch_size: int = hparams.field(32, at_least=1)
  eval_batch_size: int = hparams.field(32, at_least=1, resumable=True)
  # Test sets and --predict.
  predict_batch_size: int = hparams.field(32, at_least=1, resumable=True)
  # The pre-trained checkpoint's vocabulary is signed with its sizes ("model").
  vocab_size: int = hparams.field(30522, at_least=1, resumable=True)

  # New: a change of the pre-trained weights' values before fine-tuning (names and
  # shapes stay), for encoders pre-trained briefly from the mimetic start
  # (model/initialization.py, adjust_pretrained): "attention" starts attention uniform,
  # "positions" scales the position embeddings to the word embeddings' norm.
  init_adjustment: str = hparams.field("none", choices=INIT_ADJUSTMENTS)

  # Locations; empty means the original layout under data_dir.
  vocab_file: str = hparams.field("", resumable=True)
  # A pre-trained checkpoint (ours or the original's).
  init_checkpoint: str = hparams.field("", resumable=True)
  model_dir: str = hparams.field("", resumable=True)
  results_dir: str = hparams.field("", resumable=True)
  # Read tasks prepared by TensorFlow Datasets from here.
  tfds_data_dir: str = hparams.field("", resumable=True)
  # Allow a model_dir holding a different run.
  overwrite_model_dir: bool = hparams.field(False, resumable=True)

  def __post_init__(self):
    hparams.check_fields(self)
    self.check_batch_split(self.train_batch_size)
    pretrained = self.pretrained_model_dir
    tasks = self.tasks_label
    defaults = {
        "model_dir": os.path.join(pretrained, "finetuning_models", f"{tasks}_model"),
        "results_dir": os.path.join(pretrained, "results"),
        "vocab_file": next((p for p in (os.path.join(pretrained, "vocab.txt"),
                                        os.path.join(self.data_dir, "vocab.txt"))
                            if os.path.exists(p)), os.path.join(self.data_dir, "vocab.txt")),
    }
    for name, default in defaults.items():
      if not getattr(self, name):
        object.__setattr__(self, name, default)

  @property
  def pretrained_model_dir(self) -> str:
    return os.path.join(self.data_dir, "models", self.model_name)

  @functools.cached_property  # once: a user's task is read from its JSON file
  def tasks_label(self) -> str:
    """The tasks' names joined, for file names (a user's task by its own name)."""
    return ",".join(task_registry.get_task(n).name.replace("/", "_")
                    for n in self.task_names)

  def results_file(self, extension: str) -> str:
    return os.path.join(self.results_dir, f"{self.tasks_label}_results.{extension}")

  def model_config(self) -> ModelConfig:
    return ModelConfig.for_run(self)

  def to_dict(self) -> Dict[str, Any]:
    return dataclasses.asdict(self)


def load_config(model_name: str, task_names: List[str], data_dir: str = "data",
                overrides: Optional[Dict[str, Any]] = None,
                elsewhere: Optional[Dict[str, Callable[[], type]]] = None
                ) -> FinetuningConfig:
  """Original defaults < size preset < single-task defaults < overrides. `elsewhere`:
  the other phase's config, for hparams.check_overrides."""
  overrides = hparams.check_overrides(FinetuningConfig, overrides or {},
                                      elsewhere=elsewhere)
  tasks = task_registry.get_tasks(task_names)
  values = {**hparams.load_preset("finetuning", hparams.model_size(model_name, overrides)),
            "model_name": model_name,
            "data_dir": data_dir,
            # Registered tasks by canonical name; users' tasks stay the path of their JSON.
            "task_names": [n if task_registry.task_file_family(n) else t.name
                           for n, t in zip(task_names, tasks)]}
  values.update(task_registry.task_defaults(tasks))
  values.update(overrides)
  for name in ("vocab_file", "model_dir", "results_dir"):
    values.setdefault(name, "")
  return hparams.update(FinetuningConfig(), values)
