"""Runs an original-format checkpoint on given inputs and saves every output.

  python -m tools.reference_outputs --checkpoint CKPT [--config CONFIG.json] \
      --inputs IN.npz --output OUT.npz

CKPT is any pre-trained checkpoint the project reads (docs/pretraining.md, "Released
checkpoints"). OUT.npz receives float32 discriminator_hidden [batch, seq, H],
discriminator_logits [batch, seq], generator_hidden [batch, seq, h] and
generator_logits [batch, seq, vocab] of the networks CKPT holds, in inference mode;
without CONFIG.json the sizes come from the checkpoint's variable shapes.
"""

import argparse
import json
import sys
import zipfile

from util import startup  # pylint: disable=unused-import  # first: sets TensorFlow's environment

import numpy as np  # pylint: disable=wrong-import-order

from model.config import ModelConfig
from runs.pretrained import open_weights
from util import cli, hparams
from util.files import atomic_write, check_output

INPUT_NAMES = ("input_ids", "input_mask", "segment_ids")


def read_inputs(path: str):
  expected = f"expected a .npz of {', '.join(INPUT_NAMES)} of shape [batch, seq]"
  try:
    data = np.load(path)
    missing = [n for n in INPUT_NAMES if n not in data]
    arrays = {} if missing else {n: data[n] for n in INPUT_NAMES}  # read here
  # An empty or cut file: EOFError, BadZipFile; an array of objects: ValueError.
  except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
    raise ValueError(f"{path}: cannot read as .npz ({cli.first_line(e)}); "
                     f"{expected}") from None
  if missing:
    raise ValueError(f"{path}: missing array(s) {', '.join(missing)}; {expected}")
  shape = arrays["input_ids"].shape
  for name, array in arrays.items():
    if array.ndim != 2:
      raise ValueError(f"{path}: {name} has shape {list(array.shape)}; expected "
                       "[batch, seq]")
    if array.shape != shape:
      raise ValueError(f"{path}: {name} has shape {list(array.shape)}; expected "
                       f"input_ids' {list(shape)}")
    if not np.issubdtype(array.dtype, np.integer):
      raise ValueError(f"{path}: {name} has dtype {array.dtype}, expected int32")
  return {n: a.astype(np.int32) for n, a in arrays.items()}


def read_config(path: str):
  try:
    with open(path, encoding="utf-8") as f:
      values = hparams.load_json(f.read(), path)
  except UnicodeDecodeError as e:
    raise ValueError(f"--config {path}: not UTF-8 text (byte {e.start}); expected a "
                     "model's config.json") from None
  except (OSError, json.JSONDecodeError) as e:
    raise ValueError(f"{path}: cannot read the config JSON ({e})") from None
  return ModelConfig.from_dict(values, source=path)


def compute(checkpoint: str, inputs, config=None, log=print):
  """Every output the checkpoint's networks give: a discriminator alone (as a Hugging
  Face ElectraForPreTraining directory is most often downloaded) gives its two."""
  weights = open_weights(checkpoint)
  part = weights.part_held()
  if part != "pair":
    missing = "generator" if part == "discriminator" else "discriminator"
    log(f"note: {checkpoint} holds the {part} only: {missing}_hidden and "
        f"{missing}_logits are not written (they need the {missing}: give a folder "
        "holding both Hugging Face directories, or the whole pre-trained pair)")
  pair = weights.load_pair(config, part)
  sizes = pair.model_config
  for name, size, what in (("input_ids", sizes.vocab_size, "vocabulary"),
                           ("segment_ids", sizes.type_vocab_size, "type_vocab_size")):
    ids = inputs[name]
    if ids.size and (ids.max() >= size or ids.min() < 0):
      raise ValueError(f"{name} outside [0, {size}) for this checkpoint's {what} "
                       f"(found {ids.min()}..{ids.max()})")
  seq = inputs["input_ids"].shape[1]
  if seq > pair.model_config.max_position_embeddings:
    raise ValueError(f"sequence length {seq} exceeds max_position_embeddings "
                     f"{pair.model_config.max_position_embeddings}")
  outputs = pair(inputs, training=False)
  return {name: value.numpy().astype(np.float32) for name, value in outputs.items()
          if part == "pair" or name.startswith(part)}


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--checkpoint", required=True)
  parser.add_argument("--config", default=None)
  parser.add_argument("--inputs", required=True)
  parser.add_argument("--output", required=True)
  args = parser.parse_args(argv)
  cli.check_given(parser, args, "checkpoint", "config", "inputs", "output")

  def write_outputs() -> int:
    check_output("--output", args.output, {"--inputs": args.inputs,
                                           "--checkpoint": args.checkpoint,
                                           "--config": args.config})
    inputs = read_inputs(args.inputs)
    config = read_config(args.config) if args.config else None
    outputs = compute(args.checkpoint, inputs, config)
    with atomic_write(args.output, "wb") as f:
      np.savez(f, **outputs)
    shapes = ", ".join(f"{k} {list(v.shape)}" for k, v in outputs.items())
    print(f"wrote {args.output}: {shapes}")
    return 0
  return cli.run_command(write_outputs)


if __name__ == "__main__":
  sys.exit(main())
