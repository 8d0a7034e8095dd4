"""Fine-tuning hyperparameters: one object, the original's names and defaults.

Each task family's own fields are a section (its family.py's settings), and a run holds
its tasks' families' sections only, so a question-answering field neither signs nor is
recorded by a GLUE run. Overrides stay flat, as the original's: a section's name given
for a run without that family is checked, then unused (one --hparams file may serve
several tasks' runs).

Original defaults < configs/finetuning/<size>.json < configs/finetuning/task_defaults.json
(single-task runs) < --hparams. Paths follow the original's layout under <data_dir>:
finetuning_data/<task>/, models/<model_name>/ (pre-trained weights, vocab.txt, results/).
"""

import dataclasses
import functools
import os
from typing import Any, Callable, Dict, List, Optional, Tuple

from finetune import tasks as task_registry
from model.config import INIT_ADJUSTMENTS, ModelChoice, ModelConfig, check_model_name
from util import hparams
from training.settings import RunFields, ScaleSettings


@dataclasses.dataclass(frozen=True)
class FinetuningConfig(RunFields, ScaleSettings, ModelChoice):
  """Every field of a fine-tuning run: these, those both phases share (RunFields,
  ScaleSettings, ModelChoice) and, in `sections`, its task families' own
  (finetune/<family>/family.py)."""
  task_names: List[str] = hparams.field(
      default_factory=lambda: ["glue/sst2"],
      help="The tasks (--task); several train together.")
  debug: bool = hparams.field(
      False, help="Quick checks: 100 examples per split and, unless init_checkpoint is "
                  "given, a tiny random model.")
  num_trials: int = hparams.field(
      1, at_least=1, resumable=True,
      help="Runs with different seeds (seed, seed + 1, ..., wrapped round to 0 past "
           "4294967295); each is reported, and their median.")
  do_eval: bool = hparams.field(
      True, resumable=True, help="Evaluate on the dev split after training.")
  keep_all_models: bool = hparams.field(
      True, resumable=True, help="False: delete each trial's model once it is scored.")
  export_serving: bool = hparams.field(
      True, help="Each kept trial's model also as a serving SavedModel "
                 "(finetune/serving.py); a study that wants only scores turns it off "
                 "(its cost: bench/RESULTS.md, \"Figures moved from code comments\").")
  write_curves: bool = hparams.field(
      True, resumable=True,
      help="False: no PNGs (each trial's training curves after each epoch, the results' "
           "dev curves); the logs and results they are drawn from are written as ever. "
           "For a study that reads only scores (their cost: bench/RESULTS.md, \"Figures "
           "moved from code comments\").")

  learning_rate: float = hparams.field(
      1e-4, above=0, group="Training", help="Peak learning rate, the top layer's.")
  layerwise_lr_decay: float = hparams.field(
      0.8, above=0, at_most=1,
      help="Each layer learns at this times the rate of the layer above.")
  num_train_epochs: float = hparams.field(
      3.0, above=0, help="Passes over the training data.")
  warmup_proportion: float = hparams.field(
      0.1, at_least=0, at_most=1,
      help="Share of the steps over which the learning rate rises from 0.")
  save_checkpoints_steps: int = hparams.field(
      1000000, at_least=1, resumable=True, help="Steps between checkpoints.")
  log_every_steps: int = hparams.field(
      50, at_least=1, resumable=True,
      help="Steps between log lines (train_log.jsonl, TensorBoard, progress).")
  write_test_outputs: bool = hparams.field(
      False, resumable=True, help="Write GLUE's submission files for the test split.")
  n_writes_test: int = hparams.field(
      5, at_least=0, resumable=True,
      help="Trials that write test outputs (the first ones).")

  train_batch_size: int = hparams.field(
      32, at_least=1, group="Sizing",
      help="Sequences per training step, over all devices (the global batch).")
  eval_batch_size: int = hparams.field(
      32, at_least=1, resumable=True, help="Sequences per evaluation batch.")
  predict_batch_size: int = hparams.field(
      32, at_least=1, resumable=True, help="Test sets and --predict.")
  batch_length_multiple: int = hparams.field(
      8, at_least=0, resumable=True,
      help="New: each batch (training, evaluation, --predict) is cut to its longest "
           "example's tokens rounded up to a multiple of this, so it computes on the "
           "tokens that exist (finetune/padding.py); the results equal max_seq_length's "
           "within float rounding. A run meets at most max_seq_length / this lengths, "
           "each compiled once (a first step at a new length costs about one more step: "
           "bench/RESULTS.md). 0 pads every batch to max_seq_length, as the original "
           "(and always on a TPU).")
  length_grouping_batches: int = hparams.field(
      0, at_least=0, help="New, opt-in: the examples of this many training batches at a "
                          "time are sorted by length and cut into batches, which are "
                          "then shuffled: batches of like lengths, less padding, another "
                          "order than the original's. 0: the original's random batches.")
  vocab_size: int = hparams.field(
      30522, at_least=1, resumable=True,
      help="The pre-trained checkpoint's vocabulary is signed with its sizes "
           "(\"model\").")

  init_adjustment: str = hparams.field(
      "none", choices=INIT_ADJUSTMENTS,
      help="New: a change of the pre-trained weights' values before fine-tuning (names "
           "and shapes stay), for encoders pre-trained briefly from the mimetic start "
           "(model/initialization.py, adjust_pretrained): \"attention\" starts attention "
           "uniform, \"positions\" scales the position embeddings to the word "
           "embeddings' norm.")

  init_checkpoint: str = hparams.field(
      "", resumable=True, group="Locations",
      help="A pre-trained checkpoint (ours or the original's).")
  results_dir: str = hparams.field(
      "", resumable=True,
      help="Scores (empty: `<data_dir>/models/<model_name>/results`).")
  tfds_data_dir: str = hparams.field(
      "", resumable=True, help="Read tasks prepared by TensorFlow Datasets from here.")
  # {family name: its settings} for the families of task_names that declare settings;
  # built from the families' defaults when not given. Not an hparams name: overrides
  # name the sections' fields themselves.
  sections: Dict[str, Any] = dataclasses.field(default_factory=dict)

  def __post_init__(self):
    hparams.check_fields(self)
    given = self.sections
    sections = {family.name: given.get(family.name) or family.settings()
                for family in self.families if family.settings}
    for section in sections.values():
      hparams.check_fields(section)
    object.__setattr__(self, "sections", sections)
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
  def families(self) -> list:
    """The task families of task_names, each once, in the order of their tasks."""
    families = [task_registry.family_of(task_registry.get_task(n))
                for n in self.task_names]
    return [f for i, f in enumerate(families) if f not in families[:i]]

  def signed_fields(self) -> Dict[str, Any]:
    """The fields that fix a trial's trained weights: every one not declared resumable,
    the sections' under "sections" (resume.check_resume compares nested dicts)."""
    def fixed(settings) -> Dict[str, Any]:
      resumable = hparams.marked_fields(settings, "resumable")
      return {k: v for k, v in dataclasses.asdict(settings).items() if k not in resumable}
    return {**{k: v for k, v in fixed(self).items() if k != "sections"},
            "sections": {name: fixed(s) for name, s in self.sections.items()}}

  @classmethod
  def from_record(cls, values: Dict[str, Any]) -> "FinetuningConfig":
    """The config a run record holds ("finetuning" of its record)."""
    values = dict(values)
    given = values.pop("sections", None) or {}
    sections = {family.name: family.settings(**given[family.name])
                for family in task_registry.FAMILIES
                if family.settings and given.get(family.name)}
    known = {f.name for f in dataclasses.fields(cls)} - {"sections"}
    return cls(**{k: v for k, v in values.items() if k in known}, sections=sections)

  @property
  def pretrained_model_dir(self) -> str:
    return os.path.join(self.data_dir, "models", self.model_name)

  @functools.cached_property  # once: a user's task is read from its JSON file
  def tasks_label(self) -> str:
    """The tasks' names joined, for file names (a user's task by its own name)."""
    return ",".join(task_registry.get_task(n).name.replace("/", "_")
                    for n in self.task_names)

  def trial_seed(self, trial: int) -> int:
    """The seed of trial `trial` (from 1): seed, seed + 1, ..., wrapped round to 0 past
    the largest seed, so that every allowed seed serves any number of trials."""
    return (self.seed + trial - 1) % (hparams.SEED["at_most"] + 1)

  def results_file(self, extension: str) -> str:
    return os.path.join(self.results_dir, f"{self.tasks_label}_results.{extension}")

  def model_config(self) -> ModelConfig:
    return ModelConfig.for_run(self)

  @classmethod
  def hyperparameter_names(cls) -> List[str]:
    """The names overrides may give: the run's fields and every family's section's."""
    return list(_homes())


def _homes() -> Dict[str, Optional[Any]]:
  """{hyperparameter name: the family whose section holds it, None for the run's own};
  a name two places declare is refused (a flat override must find one home)."""
  homes = {name: None for name in hparams.field_names(FinetuningConfig)
           if name != "sections"}
  for family in task_registry.FAMILIES:
    for field in dataclasses.fields(family.settings) if family.settings else ():
      if field.name in homes:
        other = homes[field.name]
        raise ValueError(f"task family {family.name}: setting {field.name!r} is declared "
                         f"{f'by family {other.name}' if other else 'by FinetuningConfig'}"
                         " already; give it another name")
      homes[field.name] = family
  return homes


def check_overrides(overrides: Dict[str, Any], source: str = "--hparams",
                    elsewhere: Optional[Dict[str, Callable[[], type]]] = None
                    ) -> Tuple[Dict[str, Any], Dict[str, Dict[str, Any]]]:
  """(the run's own fields, {family name: its section's fields}) of flat `overrides`,
  each value checked by the class declaring it; errors name `source` (and, through
  `elsewhere`, a name of the other phase)."""
  homes = _homes()
  own, sections = {}, {}
  for name, value in overrides.items():
    if name not in homes:
      hparams.refuse_unknown(name, homes, source, elsewhere)
    family = homes[name]
    declared = family.settings if family else FinetuningConfig
    checked = hparams.check_overrides(declared, {name: value}, source)[name]
    (sections.setdefault(family.name, {}) if family else own)[name] = checked
  return own, sections


def load_config(model_name: str, task_names: List[str], data_dir: str = "data",
                overrides: Optional[Dict[str, Any]] = None,
                elsewhere: Optional[Dict[str, Callable[[], type]]] = None
                ) -> FinetuningConfig:
  """Original defaults < size preset < single-task defaults < overrides. `elsewhere`:
  the other phase's config, for hparams.check_overrides."""
  overrides = overrides or {}
  check_overrides(overrides, elsewhere=elsewhere)  # refused naming --hparams
  check_model_name(model_name, overrides)
  tasks = task_registry.get_tasks(task_names)
  values = {**hparams.load_preset("finetuning", hparams.model_size(model_name, overrides)),
            "model_name": model_name,
            "data_dir": data_dir,
            # Registered tasks by canonical name; users' tasks stay the path of their JSON.
            "task_names": [n if task_registry.is_task_file(n) else t.name
                           for n, t in zip(task_names, tasks)]}
  values.update(task_registry.task_defaults(tasks))
  values.update(overrides)
  for name in ("vocab_file", "model_dir", "results_dir"):
    values.setdefault(name, "")
  own, sections = check_overrides(values)
  config = dataclasses.replace(FinetuningConfig(), **own)
  # Sections of families outside this run are left out (their values were checked).
  return dataclasses.replace(config, sections={
      name: dataclasses.replace(settings, **sections.get(name, {}))
      for name, settings in config.sections.items()})
