"""What an encoder encodes, and where fine-tuning's first gradients go.

  python -m experiments.encoder_anatomy --data-dir DIR --encoder NAME=PATH [--encoder ...]
      [--random NAME] [--hparams '{...}'] [--steps 250] [--output anatomy.json]

An experiment run by hand (why a pre-trained discriminator fine-tunes worse than
random weights). For each encoder (weights as --init-checkpoint takes them; --random
names a random one of the configured size), on the --task (default
glue/sst2; its files in <data-dir>/finetuning_data/ as run_finetuning.py reads them):
1. per layer (0: the first layer's input, i: layer i's output), over the real tokens of
   --sentences dev examples, the share of the states' variance that position alone
   explains and the share that token identity alone explains (between-group over total
   sum of squares less chance, [CLS]/[SEP] and tokens seen fewer than 5 times left
   out);
2. what [CLS] attends to in each layer: the entropy of its attention over the real
   tokens as a share of the uniform's (1: uniform, 0: one token), its weight on itself,
   and its mean distance in tokens;
3. --steps steps of the fine-tuning recipe (run_finetuning.py's model, loss, optimizer,
   clipping and example order), logging the training loss and each part's share of the
   squared gradient norm (embeddings, layer i, head) before clipping.
"""

import argparse
import json
import re
import sys
import tempfile

import numpy as np
import tensorflow as tf

from finetune.config import load_config
from finetune.modeling import FinetuningLoss
from finetune.trainer import Finetuner
from model.initialization import apply_init_scheme
from util import cli, hparams
from util.files import atomic_write

MIN_COUNT = 5  # a token seen fewer times has no reliable mean of its own


def between_share(states: np.ndarray, groups: np.ndarray) -> float:
  """Share of the total sum of squares of `states` [N, H] explained by group means,
  less what k group means of noise would explain (epsilon squared: 0 when the groups
  carry nothing, so shares of many small groups compare with those of few large)."""
  centred = states - states.mean(0)
  total = float((centred ** 2).sum())
  _, inverse, counts = np.unique(groups, return_inverse=True, return_counts=True)
  sums = np.zeros((len(counts), states.shape[1]))
  np.add.at(sums, inverse, centred)
  between = float(((sums ** 2).sum(1) / counts).sum())
  n, k = len(states), len(counts)
  return (between - (k - 1) * (total - between) / (n - k)) / total


def anatomy(encoder, features, special_ids) -> list:
  """Per layer: position and token shares and [CLS]'s attention (module docstring)."""
  inputs = {k: tf.constant(features[k]) for k in ("input_ids", "input_mask",
                                                  "segment_ids")}
  states, probs = encoder.inspect(inputs)
  ids, mask = features["input_ids"], features["input_mask"].astype(bool)
  positions = np.broadcast_to(np.arange(ids.shape[1]), ids.shape)
  tokens, counts = np.unique(ids[mask], return_counts=True)
  frequent = set(tokens[counts >= MIN_COUNT].tolist()) - set(special_ids)
  keep = mask & np.isin(ids, list(frequent))
  lengths = mask.sum(1)
  rows = []
  for layer, state in enumerate(states):
    flat = state.numpy()[keep]
    row = {"layer": layer, "position_share": between_share(flat, positions[keep]),
           "token_share": between_share(flat, ids[keep])}
    if layer:
      cls = probs[layer - 1].numpy()[:, :, 0, :]  # [B, heads, S]: [CLS]'s attention
      p = np.clip(cls, 1e-12, 1.0)
      entropy = -(p * np.log(p) * mask[:, None]).sum(-1) / np.log(lengths)[:, None]
      distance = (cls * positions[:, None]).sum(-1)
      row.update(cls_entropy=float(entropy.mean()), cls_self=float(cls[:, :, 0].mean()),
                 cls_distance=float(distance.mean()))
    rows.append(row)
  return rows


def part_of(name: str) -> str:
  layer = re.search(r"/layer_(\d+)/", name)
  if layer:
    return "layer_" + layer.group(1)
  return "embeddings" if "/embeddings" in name else "head"


def first_steps(finetuner: Finetuner, steps: int, seed: int, start) -> dict:
  """The recipe's first `steps` steps: loss and gradient shares per part, each step."""
  config = finetuner.config
  train = finetuner.train_features()
  with tempfile.TemporaryDirectory() as model_dir:
    loop = finetuner.train_loop(train, steps, model_dir)
  model, optimizer = loop.train_step.model, loop.train_step.optimizer
  if finetuner.start:
    model.load_pretrained(finetuner.start.weights, finetuner.config.init_adjustment)
  start(model)
  objective = FinetuningLoss(finetuner.runners, config.train_batch_size)
  variables = model.trainable_variables
  parts = sorted({part_of(v.name) for v in variables})
  index = tf.constant([parts.index(part_of(v.name)) for v in variables])

  @tf.function
  def step(batch):
    with tf.GradientTape() as tape:
      loss, scalars = objective.compute(model, batch, 0, training=True, step=0)
    grads = tape.gradient(loss, variables)
    squares = tf.stack([tf.reduce_sum(tf.convert_to_tensor(g) ** 2) for g in grads])
    optimizer.apply_gradients(zip(grads, variables))
    return scalars["mean_loss"], tf.math.unsorted_segment_sum(squares, index, len(parts))

  dataset = finetuner.dataset_fn(train, steps, seed)(tf.distribute.InputContext())
  log = []
  for batch in dataset:
    loss, squares = step(batch)
    squares = squares.numpy()
    log.append({"loss": float(loss), "grad_norm": float(np.sqrt(squares.sum())),
                **{p: float(s / squares.sum()) for p, s in zip(parts, squares)}})
  return {"steps": log, "dev": finetuner.evaluate(model)}


def parse_args(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--data-dir", required=True)
  parser.add_argument("--encoder", action="append", default=[], metavar="NAME=PATH")
  parser.add_argument("--random", action="append", default=[], metavar="NAME[=SCHEME]",
                      help="a random encoder; SCHEME an init_scheme of pre-training "
                      "(default: the fine-tuning model's own truncated normal)")
  parser.add_argument("--task", default="glue/sst2")
  parser.add_argument("--hparams", default="",
                      help="fine-tuning hparams: a JSON object or a JSON file")
  parser.add_argument("--sentences", type=int, default=256)
  parser.add_argument("--steps", type=int, default=250)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--output", default="anatomy.json")
  args = parser.parse_args(argv)
  cli.check_flags(parser, args, sentences={"at_least": 1}, steps={"at_least": 1},
                  seed=hparams.SEED)
  cli.check_given(parser, args, "output")
  return args


def main(argv=None) -> int:
  args = parse_args(argv)
  return cli.run_command(lambda: anatomy_of_encoders(args))


def anatomy_of_encoders(args) -> int:
  """Each encoder's anatomy and first steps, printed and written to --output."""
  overrides = hparams.parse_hparams(args.hparams)
  encoders = [(*e.split("=", 1), "") for e in args.encoder] + [
      (name, "", scheme) for name, _, scheme in (r.partition("=") for r in args.random)]
  results = {}
  for name, path, scheme in encoders:
    config = load_config("anatomy", [args.task], args.data_dir, {
        "export_serving": False, **overrides, "init_checkpoint": path, "seed": args.seed})
    finetuner = Finetuner(config, log=lambda _: None)
    task = finetuner.tasks[0]
    dev = finetuner.split(0, task.eval_splits[0]).features
    dev = {k: v[:args.sentences] for k, v in dev.items()}
    model = finetuner.build_model()
    if finetuner.start:
      model.load_pretrained(finetuner.start.weights, finetuner.config.init_adjustment)
    vocab = finetuner.tokenizer.vocab
    start = lambda m: apply_init_scheme(
        m, scheme, args.seed, m.model_config.initializer_range,
        cls_id=vocab.cls_id) if scheme else None
    start(model)
    special = [vocab.cls_id, vocab.sep_id, vocab.pad_id]
    results[name] = {"layers": anatomy(model.encoder, dev, special),
                     **first_steps(finetuner, args.steps, args.seed, start)}
    print(json.dumps({"encoder": name, "layers": results[name]["layers"],
                      "dev": results[name]["dev"]}), flush=True)
  with atomic_write(args.output) as f:
    json.dump(results, f, indent=1)
  return 0


if __name__ == "__main__":
  sys.exit(main())
