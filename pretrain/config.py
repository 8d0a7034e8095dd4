"""Pre-training hyperparameters: one object, the original's names and defaults.

Defaults are the original's `PretrainingConfig`; presets in configs/pretraining/<name>.json
override them per model size, and --hparams (JSON or a JSON file) overrides those. Paths
follow the original data-dir layout: <data_dir>/pretrain_tfrecords, <data_dir>/vocab.txt,
<data_dir>/models/<model_name>.
"""

import dataclasses
import json
import os
from typing import Any, Callable, Dict, Optional

from model.config import (INIT_SCHEMES, ModelChoice, ModelConfig, check_model_name,
                          check_vocab_size)
from data_prep import records
from data_prep.vocab import load_vocab
from util import hparams
from training.settings import RunFields, ScaleSettings


# The objectives by name: one class each in pretrain/objectives/ (OBJECTIVES there).
OBJECTIVES = ("masked_lm", "electra", "electric")


def objective_of_switches(electra_objective: Optional[bool],
                          electric_objective: Optional[bool]) -> str:
  """The objective the original's switches choose (each None: its default, true and
  false): electric_objective first, then electra_objective."""
  if electric_objective:
    return "electric"
  return "masked_lm" if electra_objective is False else "electra"


def check_objective_names(objective: str, electra_objective: Optional[bool],
                          electric_objective: Optional[bool]):
  """Refuses `objective` beside the original's switches when they choose another one
  (either would otherwise win without a word)."""
  chosen = objective_of_switches(electra_objective, electric_objective)
  if objective != chosen:
    given = {"electra_objective": electra_objective,
             "electric_objective": electric_objective}
    switches = ", ".join(f"{name} {json.dumps(value)}" for name, value in
                         given.items() if value is not None)
    raise hparams.HParamsError(
        f"objective {objective} and the original's {switches} (objective "
        f"{chosen}) disagree; give one of them")


@dataclasses.dataclass(frozen=True)
class PretrainingConfig(RunFields, ScaleSettings, ModelChoice):
  debug: bool = hparams.field(
      False, resumable=True, help="Tiny model and few steps, for quick checks.")
  do_eval: bool = hparams.field(
      False, resumable=True,
      help="Evaluate after training (results/unsup_results.txt and .json).")

  objective: str = hparams.field(
      "electra", choices=OBJECTIVES, meaning=True,
      help="The objective (pretrain/objectives/): ELECTRA, Electric, or BERT-style "
           "masked LM only. The original's switches are accepted as aliases: "
           "electric_objective true is \"electric\", else electra_objective false is "
           "\"masked_lm\".")
  electra_objective: dataclasses.InitVar[Optional[bool]] = None
  electric_objective: dataclasses.InitVar[Optional[bool]] = None
  gen_weight: float = hparams.field(
      1.0, at_least=0, meaning=True, help="Weight of the generator's masked-LM loss.")
  disc_weight: float = hparams.field(
      50.0, at_least=0, meaning=True,
      help="Weight of the discriminator's replaced-token loss.")
  disc_weight_ramp_steps: int = hparams.field(
      0, at_least=0,
      help="New: the discriminator's loss weight grows linearly from 0 to disc_weight "
           "over this many steps (0: the original's constant weight), so that a tied or "
           "shared encoder first learns from the generator's richer signal.")
  mask_prob: float = hparams.field(
      0.15, above=0, at_most=1, meaning=True,
      help="Share of each sequence's word-pieces masked.")

  init_scheme: str = hparams.field(
      "truncated_normal", choices=INIT_SCHEMES,
      help="The start of a fresh run (model/initialization.py): the original's "
           "truncated normal, \"mimetic\" (smooth positions, attention that follows "
           "similarity), or \"mimetic_generator\" (the mimetic start for the generator "
           "only: nothing the discriminator reads, so that it fine-tunes as well as "
           "random weights from step 0), or \"mimetic_open_cls\" (the mimetic start with "
           "[CLS] embedding to zero: its first layer's attention is uniform over the "
           "sentence).")
  disc_prior_init: bool = hparams.field(
      False, help="New: the discriminator's output layer starts at the base rate "
                  "(kernel 0, bias log(mask_prob / (1 - mask_prob))) instead of the "
                  "original's random layer.")
  generator_unigram_init: bool = hparams.field(
      False, help="New: the generator's output bias starts at the records' log unigram "
                  "frequencies (the original's starts at 0: uniform samples, mostly rare "
                  "tokens).")

  learning_rate: float = hparams.field(
      5e-4, above=0, group="Optimization", help="Peak learning rate.")
  lr_decay_power: float = hparams.field(
      1.0, at_least=0,
      help="Power of the learning rate's decay to 0 at num_train_steps (1: linear).")
  num_warmup_steps: int = hparams.field(
      10000, at_least=0,
      help="Steps over which the learning rate rises linearly from 0.")
  disc_lr_multiplier: float = hparams.field(
      1.0, above=0, help="New: the discriminator's variables (its layers, head and the "
                         "embeddings it shares with the generator) learn at "
                         "learning_rate x this; the generator's own at the full rate.")
  disc_warmup_steps: int = hparams.field(
      0, at_least=0,
      help="New: the discriminator's variables warm up over this many steps instead of "
           "num_warmup_steps (0: the shared warmup), so that its rate can rise after the "
           "young generator's easy replacements are past.")

  save_checkpoints_steps: int = hparams.field(
      1000, at_least=1, resumable=True, group="Training loop",
      help="Steps between checkpoints.")
  num_train_steps: int = hparams.field(
      1000000, at_least=1, resumable=True,
      help="Training steps in all; raise it to continue a finished run.")
  num_eval_steps: int = hparams.field(
      100, at_least=1, resumable=True, help="Batches evaluated.")
  keep_checkpoint_max: int = hparams.field(
      5, at_least=1, resumable=True, help="Checkpoints kept on disk.")
  log_every_steps: int = hparams.field(
      10, at_least=1, resumable=True,
      help="Steps between log lines (train_log.jsonl, TensorBoard, progress).")

  uniform_generator: bool = hparams.field(
      False, meaning=True, group="Generator",
      help="The generator samples uniformly (the paper's baseline).")
  two_tower_generator: bool = hparams.field(
      False, meaning=True, help="The generator is Electric's two-tower cloze model (set "
                                "by objective electric).")
  untied_generator_embeddings: bool = hparams.field(
      False, meaning=True, help="The generator has embeddings of its own instead of "
                                "sharing the discriminator's.")
  untied_generator: bool = hparams.field(
      True, meaning=True, help="Generator and discriminator are two encoders (false: "
                               "one encoder plays both).")
  generator_layers: float = hparams.field(
      1.0, above=0, meaning=True,
      help="The generator's layers, as a fraction of the discriminator's.")
  generator_hidden_size: float = hparams.field(
      0.25, above=0, meaning=True,
      help="The generator's width, as a fraction of the discriminator's.")
  disallow_correct: bool = hparams.field(
      False, meaning=True,
      help="The generator's samples never repeat the original token.")
  temperature: float = hparams.field(
      1.0, above=0, meaning=True, help="Temperature of the generator's sampling.")

  train_batch_size: int = hparams.field(
      128, at_least=1, group="Batches",
      help="Sequences per training step, over all devices (the global batch).")
  eval_batch_size: int = hparams.field(
      128, at_least=1, resumable=True, help="Sequences per evaluation batch.")

  pretrain_tfrecords: str = hparams.field(
      "", resumable=True,
      group="Locations; empty means the original layout under data_dir",
      help="The records' file pattern (empty: "
           "`<data_dir>/pretrain_tfrecords/pretrain_data.tfrecord*`).")
  init_checkpoint: str = hparams.field(
      "", help="Start from these weights: a release name, a Hugging Face id or "
               "directory, an original checkpoint or a run's model dir.")

  def __post_init__(self, electra_objective, electric_objective):
    hparams.check_fields(self)
    if electra_objective is not None or electric_objective is not None:
      # The default objective cannot be told from an explicit "electra" here:
      # load_config refuses that one, knowing what was given.
      if self.objective != PretrainingConfig.objective:
        check_objective_names(self.objective, electra_objective, electric_objective)
      object.__setattr__(self, "objective",
                         objective_of_switches(electra_objective, electric_objective))
    layout = {
        "pretrain_tfrecords": os.path.join(self.data_dir, "pretrain_tfrecords",
                                           "pretrain_data.tfrecord*"),
        "vocab_file": os.path.join(self.data_dir, "vocab.txt"),
        "model_dir": os.path.join(self.data_dir, "models", self.model_name),
    }
    for name, default in layout.items():
      if not getattr(self, name):
        object.__setattr__(self, name, default)
    self.check_objective()
    self.check_batch_split(self.train_batch_size)
    self.model_config()  # its sizes, and max_seq_length against them, are valid

  def check_objective(self):
    """The rules between the objective's fields: Electric's generator is the two-tower
    cloze model (set here, as the original's config does); a two-tower generator needs
    a discriminator and a generator of its own; mimetic_generator needs ELECTRA's pair."""
    if self.objective == "electric" and not self.two_tower_generator:
      object.__setattr__(self, "two_tower_generator", True)
    if self.two_tower_generator and (self.uniform_generator or not self.untied_generator
                                     or self.objective == "masked_lm"):
      # The original crashes on these combinations (its cloze loss is never built).
      raise hparams.HParamsError(
          "a two-tower generator (two_tower_generator, or objective electric) needs "
          f"untied_generator true, uniform_generator false and objective electra or "
          f"electric (got untied_generator {str(self.untied_generator).lower()}, "
          f"uniform_generator {str(self.uniform_generator).lower()}, objective "
          f"{self.objective})")
    if self.init_scheme == "mimetic_generator" and not (
        self.objective == "electra" and self.untied_generator and
        not self.two_tower_generator):
      raise hparams.HParamsError(
          "init_scheme mimetic_generator starts the generator apart from the "
          "discriminator: it needs objective electra, untied_generator true and "
          "no two-tower generator; use \"mimetic\" otherwise")

  def with_vocab_file_size(self) -> "PretrainingConfig":
    """This config with vocab_size read from vocab_file (which must exist) when it was
    left at its default: a built dataset may carry a learned vocabulary. Set
    explicitly, vocab_size must match the file."""
    size = len(load_vocab(self.vocab_file))
    if self.vocab_size != PretrainingConfig.vocab_size:  # set: it must match
      check_vocab_size(self.vocab_file, size, self.vocab_size, "the config (vocab_size)",
                       f"set \"vocab_size\": {size}")
    return dataclasses.replace(self, vocab_size=size) if size != self.vocab_size else self

  @property
  def max_predictions_per_seq(self) -> int:
    return records.max_predictions_per_seq(self.mask_prob, self.max_seq_length)

  def model_config(self) -> ModelConfig:
    """The discriminator's sizes; the generator's follow via generator_config()."""
    return ModelConfig.for_run(
        self, generator_hidden_size=self.generator_hidden_size,
        generator_layers=self.generator_layers,
        untied_generator_embeddings=self.untied_generator_embeddings,
        # The MLM-only baseline trains one full-size encoder as the generator.
        untied_generator=self.untied_generator and self.objective != "masked_lm")

  def to_dict(self) -> Dict[str, Any]:
    return dataclasses.asdict(self)


def load_config(model_name: str, data_dir: str = "data",
                overrides: Optional[Dict[str, Any]] = None,
                elsewhere: Optional[Dict[str, Callable[[], type]]] = None
                ) -> PretrainingConfig:
  """Original defaults < size preset (configs/pretraining/<size>.json) < overrides. As
  in the original, `debug: true` shrinks the run (batch 8, 20 steps) unless the
  overrides set those values themselves. `elsewhere`: as hparams.check_overrides'."""
  overrides = hparams.check_overrides(PretrainingConfig, overrides or {},
                                      elsewhere=elsewhere)
  check_model_name(model_name, overrides)
  if "objective" in overrides and ({"electra_objective", "electric_objective"} &
                                   {k for k, v in overrides.items() if v is not None}):
    check_objective_names(overrides["objective"], overrides.get("electra_objective"),
                          overrides.get("electric_objective"))
  preset = hparams.load_preset("pretraining", hparams.model_size(model_name, overrides))
  values = {**preset, "model_name": model_name, "data_dir": data_dir}
  if overrides.get("debug"):
    values.update(hparams.load_preset("pretraining", "debug"))
  values.update(overrides)
  # Unset paths stay empty so __post_init__ derives them from this data_dir and name
  # (dataclasses.replace would otherwise copy the defaults' "data/..." paths).
  for name in ("pretrain_tfrecords", "vocab_file", "model_dir"):
    values.setdefault(name, "")
  config = dataclasses.replace(
      PretrainingConfig(), **hparams.check_overrides(PretrainingConfig, values))
  # The vocabulary, where it is built already, sizes the model (the trainer refuses a
  # missing one, with the command that builds it).
  return config.with_vocab_file_size() if os.path.isfile(config.vocab_file) else config
