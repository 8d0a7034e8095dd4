"""The fine-tuned encoder in the original release's checkpoint format (its TF1 names,
model.ckpt with config.json and vocab.txt), which every weight format here, the
original's code and tools.export_hf read: to fine-tune again from it, or to take it
elsewhere. The task head stays out (the original's loaders skip task_specific/)."""

import json
import os
import shutil
from typing import List

from model.weights.original import encoder_variables, save_variables

NAME = "original"
READER = False
PREFIX = "model.ckpt"


def refusal(job) -> str:
  del job  # every fine-tuned model has an encoder
  return ""


def write(job, folder: str, log) -> List[str]:
  finetuned = job.finetuned
  save_variables(encoder_variables(finetuned.model.encoder, "electra"),
                 os.path.join(folder, PREFIX))
  with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
    json.dump(finetuned.sizes.to_dict(), f, indent=2, sort_keys=True)
  shutil.copyfile(finetuned.vocab_file, os.path.join(folder, "vocab.txt"))
  log(f"wrote {PREFIX} (the encoder in the original's names)")
  return sorted(name for name in os.listdir(folder) if name.startswith(PREFIX)) + [
      "checkpoint", "config.json", "vocab.txt"]
