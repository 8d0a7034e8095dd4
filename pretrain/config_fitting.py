"""A pre-training config fitted to its inputs before anything is built: the sizes its
vocabulary and its start (init_checkpoint) fix, refused in one line where they cannot
serve it, and a warning for each discriminator setting the run will not carry out as
given.

Beside pretrain/config.py rather than in it: the warnings ask the objective whether it
has a discriminator, and the objectives import the config.
"""

import dataclasses
import json
import os
import sys
from typing import Optional, Tuple

from data_prep import normalization
from model.config import check_vocab_size
from runs.start import PretrainedStart, open_start
from pretrain import input_pipeline
from pretrain.config import PretrainingConfig
from pretrain.input_pipeline import InputError
from pretrain.objectives import objective_for


def checked_and_sized(config: PretrainingConfig
                      ) -> Tuple[PretrainingConfig, Optional[PretrainedStart]]:
  """The config with the sizes and normalisation its inputs fix, and its start
  (init_checkpoint's weights, opened once; None without one), after failing early,
  naming the file, when the vocabulary or the start cannot serve it."""
  if not os.path.isfile(config.vocab_file):
    if input_pipeline.matching_files(config):  # built with --vocab-file elsewhere
      raise InputError(f"{config.vocab_file}: vocabulary not found beside the records "
                       f"{config.pretrain_tfrecords}; set vocab_file to the vocab.txt "
                       "they were built with (build_pretraining_dataset.py's "
                       "--vocab-file)")
    raise InputError(f"{config.vocab_file}: vocabulary not found; run "
                     f"`{input_pipeline.build_command(config)}` first (or set vocab_file)")
  config = config.with_vocab_file_size()
  if config.vocab_size != PretrainingConfig.vocab_size:
    print(f"vocab_size {config.vocab_size}, from {config.vocab_file}", flush=True)
  start = open_start(config.init_checkpoint)  # after the vocabulary: it may download
  config = with_normalization(config, start)
  if start:
    config = fit_to_start(config, start)
  if config.do_train:
    warn_of_discriminator_settings(config)
  return config, start


def with_normalization(config: PretrainingConfig,
                       start: Optional[PretrainedStart] = None) -> PretrainingConfig:
  """The config with the text normalisation the records, the vocabulary and the start's
  weights record (normalization.settle: they must agree, and the config may not
  contradict them)."""
  records = sorted({os.path.dirname(path)
                    for path in input_pipeline.matching_files(config)})
  vocab = os.path.dirname(os.path.abspath(config.vocab_file))
  model = [start.weights.folder] if start else []
  pair = normalization.settle(config.vocab_file, [*records, vocab, *model],
                              config.do_lower_case, config.strip_accents)
  return dataclasses.replace(config, **pair.fields())


def warn_of_discriminator_settings(config: PretrainingConfig):
  """One line each for the discriminator's settings that this run does not carry out as
  given: a ramp or warmup longer than the run, or settings on an objective without a
  discriminator (warnings: a study may share them across its arms)."""
  warn = lambda line: print(f"warning: {line}", file=sys.stderr, flush=True)
  steps = config.num_train_steps
  if not objective_for(config).has_discriminator:
    given = [f"{name} {getattr(config, name):g}" for name in
             ("disc_lr_multiplier", "disc_warmup_steps", "disc_weight_ramp_steps")
             if getattr(config, name) != getattr(PretrainingConfig, name)]
    if given:
      warn(f"{', '.join(given)}: objective {config.objective} has no discriminator, so "
           f"{'this does' if len(given) == 1 else 'these do'} nothing (its one rate is "
           "learning_rate)")
    return
  ramp, warmup = config.disc_weight_ramp_steps, config.disc_warmup_steps
  if ramp > steps:
    warn(f"disc_weight_ramp_steps {ramp} is longer than num_train_steps {steps}: the "
         f"discriminator's loss weight ends at {steps / ramp:.0%} of disc_weight "
         f"{config.disc_weight:g}")
  if warmup > steps:
    warn(f"disc_warmup_steps {warmup} is longer than num_train_steps {steps}: the "
         f"discriminator's learning rate ends at {steps / warmup:.0%} of its warmup")


# The discriminator's sizes a run must set to start from a checkpoint: where each is set.
SIZE_HPARAMS = ("hidden_size", "num_hidden_layers", "num_attention_heads",
                "intermediate_size", "embedding_size", "max_position_embeddings",
                "type_vocab_size")
GENERATOR_HPARAMS = ("generator_hidden_size", "generator_layers",
                     "untied_generator_embeddings")


def fit_to_start(config: PretrainingConfig, start: PretrainedStart) -> PretrainingConfig:
  """The config with the generator's size of the start's weights (a released
  ELECTRA-Small's is full width, generator_hidden_size 1.0); refuses other size
  mismatches, saying which hparam to set."""
  path, weights = start.given, start.weights
  theirs, ours = weights.model_config(), config.model_config()
  check_vocab_size(config.vocab_file, config.vocab_size, theirs.vocab_size,
                   f"init_checkpoint {path}", "use the checkpoint's vocab.txt")
  if theirs.untied_generator and ours.untied_generator:
    adopted = {name: getattr(theirs, name) for name in GENERATOR_HPARAMS
               if getattr(theirs, name) != getattr(ours, name)}
    if adopted:
      print(f"from init_checkpoint {path}: " + ", ".join(
          f"{name} {value} (configured {getattr(ours, name)})"
          for name, value in adopted.items()), flush=True)
      config = dataclasses.replace(config, **adopted)
      ours = config.model_config()
  theirs_sizes = dict(theirs.to_dict(), embedding_size=theirs.embedding_width)
  ours_sizes = dict(ours.to_dict(), embedding_size=ours.embedding_width)
  # Sizes a format infers (the original's head count, H // 64) are not compared.
  stated = tuple(n for n in SIZE_HPARAMS if n not in weights.format.INFERRED)
  differ = {name: theirs_sizes[name] for name in stated
            if theirs_sizes[name] != ours_sizes[name]}
  if theirs.untied_generator != ours.untied_generator:
    differ["untied_generator"] = theirs.untied_generator
  if differ:
    described = ", ".join(f"{n} {v} (configured {ours_sizes[n]})" for n, v in differ.items())
    top = {n: v for n, v in differ.items() if n in ("embedding_size", "untied_generator")}
    inner = {n: v for n, v in differ.items() if n not in top}
    setting = json.dumps({**top, **({"model_hparam_overrides": inner} if inner else {})})
    raise InputError(f"init_checkpoint {path} has {described}; set {setting[1:-1]} "
                     "(or the model_size it was pre-trained at)")
  return config
