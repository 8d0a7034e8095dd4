"""The serving SavedModel (finetune/serving.py: raw strings in, the tokenizer in the
graph, --predict's outputs), written again from the checkpoint as `saved_model/`; every
fine-tuning run writes one beside its checkpoints already."""

import os
from typing import List

from finetune import serving

NAME = "saved_model"
READER = False


def refusal(job) -> str:
  finetuned = job.finetuned
  if finetuned.runner.serving:
    return ""
  return (f"saved_model takes a model of a family with a serving function (its "
          f"serving.py's SERVING); {finetuned.task.name} is of the "
          f"{finetuned.family.name} family")


def write(job, folder: str, log) -> List[str]:
  finetuned = job.finetuned
  serving.export(finetuned.model, [finetuned.runner], finetuned.runner.tokenizer.vocab,
                 finetuned.normalization, finetuned.max_seq_length,
                 os.path.join(folder, serving.SAVED_MODEL))
  log(f"wrote {serving.SAVED_MODEL}/")
  return [serving.SAVED_MODEL]
