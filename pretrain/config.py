"""Pre-training hyperparameters: one object, the original's names and defaults.

Defaults are the original's `PretrainingConfig`; presets in configs/pretraining/<name>.json
override them per model size, and --hparams (JSON or a JSON file) overrides those. Paths
follow the original data-dir layout: <data_dir>/pretrain_tfrecords, <data_dir>/vocab.txt,
<data_dir>/models/<model_name>.
"""

import dataclasses
import os
from typing import Any, Callable, Dict, Optional

from model.config import INIT_SCHEMES, ModelChoice, ModelConfig
from data_prep import records
from data_prep.vocab import load_vocab
from util import hparams
from training.settings import ScaleSettings


@dataclasses.dataclass(frozen=True)
class PretrainingConfig(ScaleSettings, ModelChoice):
  model_name: str = "electra_small"
  data_dir: str = "data"
  debug: bool = False  # tiny model and few steps, for quick checks
  do_train: bool = True
  do_eval: bool = False

  # Objective: ELECTRA, Electric, or (both false) BERT-style masked LM only.
  electra_objective: bool = True
  electric_objective: bool = False
  gen_weight: float = hparams.field(1.0, at_least=0)
  disc_weight: float = hparams.field(50.0, at_least=0)
  # New: the discriminator's loss weight grows linearly from 0 to disc_weight over this
  # many steps (0: the original's constant weight), so that a tied or shared encoder
  # first learns from the generator's richer signal.
  disc_weight_ramp_steps: int = hparams.field(0, at_least=0)
  mask_prob: float = hparams.field(0.15, above=0, at_most=1)

  # The start of a fresh run (model/initialization.py): the original's truncated
  # normal, "mimetic" (smooth positions, attention that follows similarity), or
  # "mimetic_generator" (the mimetic start for the generator only: nothing the
  # discriminator reads, so that it fine-tunes as well as random weights from step 0).
  init_scheme: str = hparams.field("truncated_normal", choices=INIT_SCHEMES)
  # New: the discriminator's output layer starts at the base rate (kernel 0, bias
  # log(mask_prob / (1 - mask_prob))) instead of the original's random layer.
  disc_prior_init: bool = False
  # New: the generator's output bias starts at the records' log unigram frequencies
  # (the original's starts at 0: uniform samples, mostly rare tokens).
  generator_unigram_init: bool = False

  # Optimization.
  learning_rate: float = hparams.field(5e-4, above=0)
  lr_decay_power: float = hparams.field(1.0, at_least=0)
  weight_decay_rate: float = hparams.field(0.01, at_least=0)
  num_warmup_steps: int = hparams.field(10000, at_least=0)
  # New: the discriminator's variables (its layers, head and the embeddings it shares
  # with the generator) learn at learning_rate x this; the generator's own at the full
  # rate.
  disc_lr_multiplier: float = hparams.field(1.0, above=0)
  # New: the discriminator's variables warm up over this many steps instead of
  # num_warmup_steps (0: the shared warmup), so that its rate can rise after the young
  # generator's easy replacements are past.
  disc_warmup_steps: int = hparams.field(0, at_least=0)

  # Training loop.
  save_checkpoints_steps: int = hparams.field(1000, at_least=1)
  num_train_steps: int = hparams.field(1000000, at_least=1)
  num_eval_steps: int = hparams.field(100, at_least=1)
  keep_checkpoint_max: int = hparams.field(5, at_least=1)
  log_every_steps: int = hparams.field(10, at_least=1)
  seed: int = hparams.field(0, at_least=0)

  # Generator.
  uniform_generator: bool = False
  two_tower_generator: bool = False
  untied_generator_embeddings: bool = False
  untied_generator: bool = True
  generator_layers: float = hparams.field(1.0, above=0)
  generator_hidden_size: float = hparams.field(0.25, above=0)
  disallow_correct: bool = False
  temperature: float = hparams.field(1.0, above=0)

  # Batches.
  max_seq_length: int = hparams.field(128, at_least=1)
  train_batch_size: int = hparams.field(128, at_least=1)
  eval_batch_size: int = hparams.field(128, at_least=1)

  # Locations; empty means the original layout under data_dir.
  pretrain_tfrecords: str = ""
  vocab_file: str = ""
  model_dir: str = ""
  init_checkpoint: str = ""
  overwrite_model_dir: bool = False  # allow a model_dir holding a different config

  def __post_init__(self):
    hparams.check_fields(self)
    layout = {
        "pretrain_tfrecords": os.path.join(self.data_dir, "pretrain_tfrecords",
                                           "pretrain_data.tfrecord*"),
        "vocab_file": os.path.join(self.data_dir, "vocab.txt"),
        "model_dir": os.path.join(self.data_dir, "models", self.model_name),
    }
    for name, default in layout.items():
      if not getattr(self, name):
        object.__setattr__(self, name, default)
    if self.electric_objective and not self.two_tower_generator:
      object.__setattr__(self, "two_tower_generator", True)  # Electric needs it
    if self.init_scheme == "mimetic_generator" and not (
        self.electra_objective and self.untied_generator and not self.two_tower_generator):
      raise hparams.HParamsError(
          "init_scheme mimetic_generator starts the generator apart from the "
          "discriminator: it needs electra_objective true, untied_generator true and "
          "no two-tower generator; use \"mimetic\" otherwise")
    self.model_config()  # its sizes, and max_seq_length against them, are valid

  def with_vocab_file_size(self) -> "PretrainingConfig":
    """This config with vocab_size read from vocab_file (which must exist) when it was
    left at its default: a built dataset may carry a learned vocabulary. Set
    explicitly, vocab_size must match the file."""
    size = len(load_vocab(self.vocab_file))
    if size == self.vocab_size:
      return self
    if self.vocab_size != PretrainingConfig.vocab_size:
      raise hparams.HParamsError(
          f"{self.vocab_file} holds {size} tokens but vocab_size is {self.vocab_size}; "
          f"set \"vocab_size\": {size}")
    return dataclasses.replace(self, vocab_size=size)

  @property
  def max_predictions_per_seq(self) -> int:
    return records.max_predictions_per_seq(self.mask_prob, self.max_seq_length)

  @property
  def results_txt(self) -> str:
    return os.path.join(self.model_dir, "results", "unsup_results.txt")

  def model_config(self) -> ModelConfig:
    """The discriminator's sizes; the generator's follow via generator_config()."""
    return ModelConfig.for_run(
        self, generator_hidden_size=self.generator_hidden_size,
        generator_layers=self.generator_layers,
        untied_generator_embeddings=self.untied_generator_embeddings,
        # The MLM-only baseline trains one full-size encoder as the generator.
        untied_generator=self.untied_generator and (
            self.electra_objective or self.electric_objective))

  def to_dict(self) -> Dict[str, Any]:
    return dataclasses.asdict(self)


def load_config(model_name: str, data_dir: str = "data",
                overrides: Optional[Dict[str, Any]] = None,
                elsewhere: Optional[Dict[str, Callable[[], type]]] = None
                ) -> PretrainingConfig:
  """Original defaults < size preset (configs/pretraining/<size>.json) < overrides.

  The preset is chosen by `model_size` from the overrides, else from the model name
  (electra_small/base/large), else "small". As in the original, `debug: true` shrinks
  the run (batch 8, 20 steps) unless the overrides set those values themselves.
  `elsewhere`: the other phase's config, for hparams.check_overrides.
  """
  overrides = hparams.check_overrides(PretrainingConfig, overrides or {},
                                      elsewhere=elsewhere)
  preset = hparams.load_preset("pretraining", hparams.model_size(model_name, overrides))
  values = {**preset, "model_name": model_name, "data_dir": data_dir}
  if overrides.get("debug"):
    values.update(hparams.load_preset("pretraining", "debug"))
  values.update(overrides)
  # Unset paths stay empty so __post_init__ derives them from this data_dir and name
  # (dataclasses.replace would otherwise copy the defaults' "data/..." paths).
  for name in ("pretrain_tfrecords", "vocab_file", "model_dir"):
    values.setdefault(name, "")
  return hparams.update(PretrainingConfig(), values)
