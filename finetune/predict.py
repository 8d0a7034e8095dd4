"""Predictions of a fine-tuned model on a user's file: one JSON line per input.

The model is trial 1 of the run the same configuration trains. The file goes through in
chunks (a large one streams, with a progress line), featurized and post-processed by the
task's runner as the evaluation's are.
"""

import itertools
import json
import os
from typing import IO

from finetune.config import FinetuningConfig
from finetune.errors import DataError
from finetune.runner import PREDICT_SPLIT
from finetune.trainer import Finetuner
from model.config import ModelConfig
from runs.model_files import FINETUNING_RECORD
from runs.record import read_record
from runs.start import record_name
from util.progress import Progress

TRIAL = 1


def check_start(config: FinetuningConfig, finetuner: Finetuner, saved: dict):
  """Refuses an init_checkpoint other than the trial's start, as a training run with it
  is refused: the model predicting is not the one the flags name."""
  if not config.init_checkpoint:
    return
  given = record_name(finetuner.start)
  recorded = saved.get("signature", {}).get("init_checkpoint", given)
  if recorded != given:
    raise ValueError(
        f"--init-checkpoint {given}: {finetuner.trial_dir(TRIAL)} was fine-tuned from "
        f"{recorded or 'random weights'} (its {FINETUNING_RECORD}); give that one, or "
        "none")


def predict_file(config: FinetuningConfig, path: str, out: IO[str], log=print,
                 chunk_size: int = 1024) -> int:
  """Writes the predictions on `path` to `out`; returns how many inputs there were."""
  if len(config.task_names) != 1:
    raise ValueError(f"--predict runs one task's model; --task names "
                     f"{len(config.task_names)} ({','.join(config.task_names)})")
  finetuner = Finetuner(config, log, finished=True)  # its training's vocabulary
  checkpoint = finetuner.finetuned_checkpoint(TRIAL)  # refuse before reading the file
  saved = read_record(finetuner.trial_dir(TRIAL), FINETUNING_RECORD)
  if saved:  # the sizes it was trained with, whatever init says now
    finetuner.model_config = ModelConfig(**saved["model"])
    check_start(config, finetuner, saved)
  if not os.path.isfile(path):
    raise DataError(f"{path}: " + ("a directory; expected the file to predict"
                                   if os.path.isdir(path) else "no such file to predict"))
  runner = finetuner.runners[0]
  examples = iter(runner.read_unlabeled(path))
  progress = Progress(f"predict {os.path.basename(path)}", None, "inputs")
  model, done = None, 0
  while chunk := list(itertools.islice(examples, chunk_size)):
    features = runner.features(chunk, PREDICT_SPLIT)
    if model is None:
      model = finetuner.build_model(features)
      finetuner.restore(model, TRIAL)
    outputs = finetuner.predict(model, features,
                                config.predict_batch_size)[runner.head_name]
    for record in runner.prediction_records(chunk, features, outputs):
      out.write(json.dumps(record, ensure_ascii=False) + "\n")
    done += len(chunk)
    progress.update(done)
  if not done:
    raise DataError(f"{path}: no inputs to predict")
  progress.update(done, force=True)
  log(f"predicted {done} inputs of {path} with {checkpoint}")
  return done
