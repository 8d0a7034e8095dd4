"""What a pre-training run's record (pretrain_config.json) holds; runs/record.py reads,
compares and writes it."""

from typing import Dict, Optional

from data_prep import normalization
from pretrain.config import PretrainingConfig
from pretrain.objectives import objective_for
from runs import model_files, record
from runs.model_files import FINETUNING_OUTPUTS, PRETRAINING_FILES
from runs.model_files import PRETRAINING_RECORD as RUN_CONFIG
from runs.pretrained import TRAINED_PART
from runs.start import PretrainedStart, record_name
from util import hparams


def run_signature(config: PretrainingConfig,
                  start: Optional[PretrainedStart] = None) -> Dict:
  """What fixes the trained weights: the model's sizes, the start (`start`, the opened
  init_checkpoint, by its record_name) and every field a resumed run may not change
  (the fields declare which: hparams.field's resumable)."""
  resumable = hparams.marked_fields(config, "resumable")
  values = {k: v for k, v in config.to_dict().items() if k not in resumable}
  values.update(run_normalization(config).fields())  # never null, fitted or not
  values["init_checkpoint"] = record_name(start)
  return {"model": config.model_config().to_dict(), **values}


def check_model_dir(config: PretrainingConfig, start: Optional[PretrainedStart] = None):
  """Refuses a model dir that holds another model's run, unless overwrite_model_dir;
  a run that only evaluates compares only what gives the weights their meaning (the
  model's sizes and vocabulary, and the fields declared so: hparams.field's meaning).
  The optimizer, schedule, seed and start do not: they made the weights, and
  evaluating them needs none of it."""
  signature = run_signature(config, start)
  layout = {"written": PRETRAINING_FILES, "beside": FINETUNING_OUTPUTS}
  if config.do_train:
    record.check_resume(config.model_dir, RUN_CONFIG, signature,
                        config.overwrite_model_dir, **layout)
  else:
    record.check_resume(config.model_dir, RUN_CONFIG,
                        {k: v for k, v in signature.items() if k == "model"
                         or k in hparams.marked_fields(config, "meaning")},
                        overwrite=False, evaluating=True, **layout)


def write_run_config(config: PretrainingConfig, step: int = 0,
                     start: Optional[PretrainedStart] = None):
  """The model dir's record; a run resumed at `step` adds the settings it changed to
  the history, so the record keeps every value a step was trained with."""
  history = record.settings_history(
      config.model_dir, RUN_CONFIG,
      {k: v for k, v in config.to_dict().items()
       if k in hparams.marked_fields(config, "resumable")}, step)
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
  model_files.write(config.model_dir, normalization.FILE,
                    run_normalization(config).fields())


def run_normalization(config: PretrainingConfig) -> normalization.Normalization:
  """The text normalisation the run's config settled (config_fitting); a config not
  fitted has none, which reads as the original's."""
  return normalization.from_fields(config.to_dict())
