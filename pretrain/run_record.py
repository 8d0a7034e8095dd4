"""A pre-training run's record in its model dir (pretrain_config.json): what signs the
run (a resumed run may not change it), the check of a model dir against it, and the
write that keeps every setting a step was trained with. runs/record.py does the
reading, comparing and atomic writing; this module says what pre-training records.
"""

import os
from typing import Dict, Optional

from data_prep import normalization
from model.weights import PRETRAINING_RECORD
from pretrain.config import RESULTS_TXT, PretrainingConfig, with_objective_named
from pretrain.objectives import objective_for
from runs import record
from runs.pretrained import TRAINED_PART
from runs.start import PretrainedStart, in_todays_name, record_name
from training.curves import EVAL_CURVE_NAME
from training.loop import LOOP_FILES
from util import hparams

RUN_CONFIG = PRETRAINING_RECORD
EXPORT_DIR = "export"
EVAL_DIR = "eval"  # TensorBoard's eval scalars
# What a run writes in its model dir beside its record, as glob patterns: with it, all
# that overwrite_model_dir deletes.
RUN_FILES = (*LOOP_FILES, EXPORT_DIR, EVAL_DIR, EVAL_CURVE_NAME,
             os.path.splitext(RESULTS_TXT)[0] + ".*", normalization.FILE)
# What fine-tuning writes in the pre-trained model's folder (finetune/config.py's
# model_dir and results_dir), which stays.
FINETUNING_OUTPUTS = ("finetuning_models", "results")


def run_signature(config: PretrainingConfig,
                  start: Optional[PretrainedStart] = None) -> Dict:
  """What fixes the trained weights: the model's sizes, the start (`start`, the opened
  init_checkpoint, by its record_name) and every field a resumed run may not change
  (the fields declare which: hparams.field's resumable)."""
  resumable = hparams.resumable_fields(config)
  values = {k: v for k, v in config.to_dict().items() if k not in resumable}
  values.update(run_normalization(config).fields())  # never null, fitted or not
  values["init_checkpoint"] = record_name(start)
  return {"model": config.model_config().to_dict(), **values}


def older_record_read(start: Optional[PretrainedStart]):
  """An older record's signature or config in today's names (record.check_resume's
  `renamed`): the objective's, then the start's."""
  return lambda values: in_todays_name(start)(with_objective_named(values))


def check_model_dir(config: PretrainingConfig, start: Optional[PretrainedStart] = None):
  """Refuses a model dir that holds another model's run, unless overwrite_model_dir;
  a run that only evaluates compares only what gives the weights their meaning (the
  model's sizes and vocabulary, and the fields declared so: hparams.field's meaning).
  The optimizer, schedule, seed and start do not: they made the weights, and
  evaluating them needs none of it."""
  signature, renamed = run_signature(config, start), older_record_read(start)
  layout = {"renamed": renamed, "written": RUN_FILES, "beside": FINETUNING_OUTPUTS}
  if config.do_train:
    record.check_resume(config.model_dir, RUN_CONFIG, signature,
                        config.overwrite_model_dir, **layout)
  else:
    record.check_resume(config.model_dir, RUN_CONFIG,
                        {k: v for k, v in signature.items()
                         if k == "model" or k in hparams.meaning_fields(config)},
                        overwrite=False, evaluating=True, **layout)


def write_run_config(config: PretrainingConfig, step: int = 0,
                     start: Optional[PretrainedStart] = None):
  """The model dir's record; a run resumed at `step` adds the settings it changed to
  the history, so the record keeps every value a step was trained with. `start`: the
  opened init_checkpoint, None without one."""
  history = record.settings_history(
      config.model_dir, RUN_CONFIG,
      {k: v for k, v in config.to_dict().items()
       if k in hparams.resumable_fields(config)}, step)
  # What the first step started from (init_scheme does not apply to a checkpoint's
  # weights, whatever the config says); kept as the run's first write recorded it.
  first = (record.read_record(config.model_dir, RUN_CONFIG) or {}).get("start") or (
      {"init_checkpoint": record_name(start)} if start
      else {"init_scheme": config.init_scheme})
  # What the run trains, for the weights' readers (runs/pretrained.py), which
  # cannot ask the objective themselves.
  record.write_record(config.model_dir, RUN_CONFIG, run_signature(config, start),
                          config=config.to_dict(), history=history, start=first,
                          **{TRAINED_PART: objective_for(config).exported_part})
  # Its text's normalisation beside its checkpoints, as beside every vocabulary, for
  # the steps that start from them.
  normalization.write(config.model_dir, run_normalization(config))


def run_normalization(config: PretrainingConfig) -> normalization.Normalization:
  """The text normalisation the run's config settled (config_fitting); a config not
  fitted has none, which reads as the original's."""
  return normalization.from_fields(config.to_dict())
