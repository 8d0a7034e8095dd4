"""Writes a model as a Hugging Face transformers ELECTRA directory.

  python -m tools.export_hf --checkpoint DIR --output HF_DIR
      [--part discriminator|generator] [--vocab FILE] [--cased]

DIR is a pre-trained checkpoint in the original format (run_pretraining.py's export/,
a released model, or a prefix): its discriminator becomes ElectraForPreTraining, its
generator (--part generator) ElectraForMaskedLM. DIR may also be a fine-tuned sentence
task's model directory (<model_dir>_<trial>, holding finetuning_config.json): it becomes
ElectraForSequenceClassification with the task's labels (a regression for STS-B-like
tasks). HF_DIR receives config.json, model.safetensors, vocab.txt, tokenizer_config.json
and special_tokens_map.json, each file whole or not at all. Nothing here needs torch.
"""

import argparse
import json
import os
import shutil
import sys

from util import startup  # pylint: disable=unused-import  # first: sets TensorFlow's environment

import safetensors.numpy  # pylint: disable=wrong-import-order

from finetune import deploy
from model.weights import huggingface as hf
from model.weights.formats import open_weights
from model.weights.original import encoder_variables, original_variables
from model.weights.run_files import FINETUNING_RECORD
from util import cli
from util.files import atomic_write, check_output


def pretrained(path: str, part: str, vocab: str):
  """(weights, config.json, model sizes, vocab.txt) of a part of a pre-trained model;
  the vocabulary `vocab`, else the model's."""
  opened = open_weights(path)
  pair = opened.load_pair(part=part)
  weights = hf.state_dict(original_variables(pair, part))
  sizes = pair.model_config if part == "discriminator" else pair.generator_model_config
  kind = hf.DISCRIMINATOR if part == "discriminator" else hf.GENERATOR
  return weights, hf.config_json(sizes, kind), sizes, opened.vocab(vocab)


def finetuned(folder: str):
  """(weights, config.json, model sizes, deploy.Finetuned) of a fine-tuned sentence
  classifier or regressor."""
  loaded = deploy.load_finetuned(
      folder, "only a model of one sentence classification or regression task has a "
      "transformers class (ElectraForSequenceClassification)", note=print)
  model, sizes = loaded.model, loaded.sizes
  weights = hf.state_dict(encoder_variables(model.encoder, "electra"))
  dense = model.heads[loaded.runner.head_name].dense
  last_norm = model.encoder.transformer_layers[-1]._output_layer_norm  # pylint: disable=protected-access
  weights.update(hf.classifier_weights(dense.kernel.numpy(), dense.bias.numpy(),
                                       last_norm.gamma.numpy(), last_norm.beta.numpy()))
  config = hf.config_json(sizes, hf.CLASSIFIER,
                          **hf.classification_labels(loaded.task.labels))
  return weights, config, sizes, loaded


def export(checkpoint: str, output: str, part: str = "", vocab: str = "",
           lower_case: bool = True) -> str:
  """Writes HF_DIR; returns the transformers class it holds."""
  folder = checkpoint if os.path.isdir(checkpoint) else os.path.dirname(checkpoint)
  if os.path.isfile(os.path.join(folder, FINETUNING_RECORD)):
    if part:
      raise ValueError(f"--part {part}: {folder} is a fine-tuned model (exported as "
                       "ElectraForSequenceClassification); --part applies to "
                       "pre-trained checkpoints")
    weights, config, sizes, loaded = finetuned(folder)
    lower_case = loaded.settings["do_lower_case"]
    vocab = vocab or loaded.vocab_file
  else:
    weights, config, sizes, vocab = pretrained(checkpoint, part or "discriminator", vocab)
  vocab_size = sum(1 for _ in open(vocab, encoding="utf-8"))
  if vocab_size != sizes.vocab_size:
    raise ValueError(f"{vocab} has {vocab_size} tokens but the model has a vocabulary "
                     f"of {sizes.vocab_size}; pass the model's vocab.txt with --vocab")
  files = {"config.json": config,
           **hf.tokenizer_files(lower_case, sizes.max_position_embeddings)}
  check_output("--output", output, {"--checkpoint": folder, "--vocab": vocab},
               writes=["model.safetensors", "vocab.txt", *files])
  os.makedirs(output, exist_ok=True)
  with atomic_write(os.path.join(output, "model.safetensors"), "wb") as f:
    f.write(safetensors.numpy.save(weights, metadata={"format": "pt"}))
  with atomic_write(os.path.join(output, "vocab.txt")) as f, \
      open(vocab, encoding="utf-8") as source:
    shutil.copyfileobj(source, f)
  for name, value in files.items():
    with atomic_write(os.path.join(output, name)) as f:
      json.dump(value, f, indent=2)
  return config["architectures"][0]


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--checkpoint", required=True,
                      help="original-format checkpoint, or a fine-tuned model directory")
  parser.add_argument("--output", required=True, help="the Hugging Face directory")
  parser.add_argument("--part", choices=("discriminator", "generator"), default="",
                      help="of a pre-trained checkpoint (default: discriminator)")
  parser.add_argument("--vocab", default="", help="vocab.txt (default: beside DIR)")
  parser.add_argument("--cased", action="store_true",
                      help="the model's tokenizer keeps case and accents")
  args = parser.parse_args(argv)
  cli.check_given(parser, args, "checkpoint", "output")

  def write() -> int:
    kind = export(args.checkpoint, args.output, args.part, args.vocab, not args.cased)
    print(f"wrote {args.output} ({kind})")
    return 0
  return cli.run_command(write)


if __name__ == "__main__":
  sys.exit(main())
