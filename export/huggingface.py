"""A Hugging Face transformers ELECTRA directory: config.json, model.safetensors,
vocab.txt, tokenizer_config.json and special_tokens_map.json. Of a pre-trained
checkpoint in the original format, its discriminator (ElectraForPreTraining) or
generator (ElectraForMaskedLM); of a fine-tuned model, its task's class:
ElectraForSequenceClassification, ElectraForTokenClassification (tagging: its logits at
each word's first piece are the tagging head's) or ElectraForQuestionAnswering (its
logits lack the head's -1000 outside the context, which a caller adds back before the
answer extraction). Nothing here needs torch."""

import json
import os
import shutil
from typing import Dict, List

import safetensors.numpy

from data_prep import normalization as normalization_lib
from data_prep.vocab import load_vocab
from export.source import Finetuned, load_finetuned
from model.config import ModelConfig, check_vocab_size
from model.internals import block_layers
from model.weights import huggingface as hf
from runs.pretrained import open_weights
from model.weights.original import encoder_variables, original_variables
from runs.model_files import FINETUNING_RECORD
from util.cli import listed
from util.files import atomic_write, check_output, make_folder

NAME = "huggingface"
READER = False
WEIGHTS = "model.safetensors"


def refusal(job) -> str:
  return _refusal(job.finetuned)


def _refusal(finetuned: Finetuned) -> str:
  family = finetuned.family.name
  if family in ("sentence", "tagging"):
    return ""
  if family != "qa":
    return (f"huggingface takes a sentence, tagging or question answering task's model "
            f"(transformers has no class of this project's {family} head); "
            f"{finetuned.task.name} is of the {family} family")
  qa = finetuned.runner.settings
  if qa.joint_prediction:
    return (f"huggingface takes a QA model whose ends are scored independently of its "
            f"starts (ElectraForQuestionAnswering); {finetuned.task.name}'s model "
            "predicts the end given the start: fine-tune with joint_prediction false")
  if finetuned.task.v2 and qa.answerable_classifier:
    return (f"huggingface takes a QA model without an answerability classifier "
            f"(ElectraForQuestionAnswering has none); {finetuned.task.name}'s model has "
            "one: fine-tune with answerable_classifier false")
  return ""


def write(job, folder: str, log) -> List[str]:
  finetuned = job.finetuned
  weights, config, sizes = _finetuned_weights(finetuned)
  _check_vocab(finetuned.vocab_file, sizes)
  names = _write_files(folder, weights, config, sizes, finetuned.vocab_file,
                       finetuned.normalization, atomic=False)
  log(f"wrote the Hugging Face files ({config['architectures'][0]})")
  return names


def _pretrained(path: str, part: str, vocab: str, cased: bool):
  """(weights, config.json, model sizes, vocab.txt, the text's normalisation) of a part
  of a pre-trained model; the vocabulary `vocab`, else the model's; `cased`: --cased."""
  opened = open_weights(path)
  pair = opened.load_pair(part=part)
  weights = hf.state_dict(original_variables(pair, part))
  sizes = pair.model_config if part == "discriminator" else pair.generator_model_config
  kind = hf.DISCRIMINATOR if part == "discriminator" else hf.GENERATOR
  vocab = opened.vocab(vocab)
  asked = False if cased else None
  return weights, hf.config_json(sizes, kind), sizes, vocab, normalization_lib.of_model(
      vocab, opened.folder, asked, asked, asked=normalization_lib.as_cased_flag)


def _finetuned_weights(loaded: Finetuned):
  """(weights, config.json, model sizes) of a fine-tuned model _refusal takes."""
  model, sizes = loaded.model, loaded.sizes
  weights = hf.state_dict(encoder_variables(model.encoder, "electra"))
  head = model.heads[loaded.runner.head_name]
  if loaded.family.name == "tagging":
    weights.update(hf.token_classifier_weights(head.dense.kernel.numpy(),
                                               head.dense.bias.numpy()))
    config = hf.config_json(sizes, hf.TOKEN_CLASSIFIER,
                            **hf.classification_labels(list(loaded.runner.labels)))
  elif loaded.family.name == "qa":
    weights.update(hf.span_weights(head.start_dense.kernel.numpy(),
                                   head.start_dense.bias.numpy(),
                                   head.end_dense.kernel.numpy(),
                                   head.end_dense.bias.numpy()))
    config = hf.config_json(sizes, hf.QUESTION_ANSWERING)
  else:
    last_norm = block_layers(model.encoder.transformer_layers[-1]).output_norm
    weights.update(hf.classifier_weights(head.dense.kernel.numpy(), head.dense.bias.numpy(),
                                         last_norm.gamma.numpy(), last_norm.beta.numpy()))
    config = hf.config_json(sizes, hf.CLASSIFIER,
                            **hf.classification_labels(loaded.task.labels))
  return weights, config, sizes


def _json_files(config: Dict[str, object], normalization: normalization_lib.Normalization,
                sizes: ModelConfig) -> Dict[str, Dict[str, object]]:
  return {"config.json": config,
          **hf.tokenizer_files(*normalization, sizes.max_position_embeddings)}


def _check_vocab(vocab: str, sizes: ModelConfig):
  # load_vocab refuses a file that is no vocab.txt by name.
  check_vocab_size(vocab, len(load_vocab(vocab)), sizes.vocab_size, "the model",
                   "pass the model's vocab.txt with --vocab")


def _write_files(folder: str, weights, config, sizes: ModelConfig, vocab: str,
                 normalization: normalization_lib.Normalization,
                 atomic: bool = True) -> List[str]:
  """The directory's files in `folder` (each whole or not at all when `atomic`; the
  registry's folder is renamed into place whole)."""
  opener = atomic_write if atomic else open
  with opener(os.path.join(folder, WEIGHTS), "wb") as f:
    f.write(safetensors.numpy.save(weights, metadata={"format": "pt"}))
  with opener(os.path.join(folder, "vocab.txt"), "w", encoding="utf-8") as f, \
      open(vocab, encoding="utf-8") as source:
    shutil.copyfileobj(source, f)
  files = _json_files(config, normalization, sizes)
  for name, value in files.items():
    with opener(os.path.join(folder, name), "w", encoding="utf-8") as f:
      json.dump(value, f, indent=2)
  return [WEIGHTS, "vocab.txt", *files]


def export(checkpoint: str, output: str, part: str = "", vocab: str = "",
           cased: bool = False) -> str:
  """Writes HF_DIR (a new or empty directory, or an earlier export's: its files are
  replaced one by one, each whole) of a pre-trained checkpoint or a fine-tuned model
  dir; returns the transformers class it holds. The text's normalisation is the one
  the model records (--cased, `cased`, asks for cased text: for a model that records
  none, as a released one)."""
  folder = checkpoint if os.path.isdir(checkpoint) else os.path.dirname(checkpoint)
  if os.path.isfile(os.path.join(folder, FINETUNING_RECORD)):
    if part:
      raise ValueError(f"--part {part}: {folder} is a fine-tuned model (exported with "
                       "its task's head); --part applies to pre-trained checkpoints")
    loaded = load_finetuned(folder, note=print)
    reason = _refusal(loaded)
    if reason:
      raise ValueError(f"{folder}: {reason}")
    weights, config, sizes = _finetuned_weights(loaded)
    normalization = loaded.normalization
    if cased and normalization.lower_case:
      raise ValueError(f"--cased: {folder} was fine-tuned on text {normalization} (its "
                       f"{FINETUNING_RECORD}); drop --cased")
    vocab = vocab or loaded.vocab_file
  else:
    weights, config, sizes, vocab, normalization = _pretrained(
        checkpoint, part or "discriminator", vocab, cased)
  _check_vocab(vocab, sizes)
  written = [WEIGHTS, "vocab.txt", *_json_files(config, normalization, sizes)]
  check_output("--output", output, {"--checkpoint": folder, "--vocab": vocab},
               writes=written)
  # Its files are replaced: only in a folder of an export's files (hidden ones aside).
  others = [name for name in (os.listdir(output) if os.path.isdir(output) else [])
            if not name.startswith(".") and name not in written]
  if others:
    raise ValueError(f"--output {output} holds what this export does not write "
                     f"({listed(others)}); give a new or empty folder, or one of an "
                     "earlier export")
  make_folder(output, output)
  _write_files(output, weights, config, sizes, vocab, normalization)
  return config["architectures"][0]

