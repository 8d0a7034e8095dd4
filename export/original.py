"""The fine-tuned encoder in the original release's checkpoint format (its TF1 names,
model.ckpt with config.json and vocab.txt, in the folder `original/`: the Hugging Face
form's config.json is another file of that name), which every weight format here, the
original's code and tools.export_hf read: to fine-tune again from it, or to take it
elsewhere. The task head stays out (the original's loaders skip task_specific/)."""

import os
from typing import List

from model.weights.original import encoder_variables, save_folder

NAME = "original"
READER = False
FOLDER = "original"
PREFIX = "model.ckpt"


def refusal(job) -> str:
  del job  # every fine-tuned model has an encoder
  return ""


def write(job, folder: str, log) -> List[str]:
  finetuned = job.finetuned
  checkpoint = os.path.join(folder, FOLDER)
  os.mkdir(checkpoint)
  save_folder(encoder_variables(finetuned.model.encoder, "electra"), checkpoint, PREFIX,
              finetuned.sizes, finetuned.vocab_file)
  log(f"wrote {FOLDER}/{PREFIX} (the encoder in the original's names)")
  return [FOLDER]
