"""Does pre-training help? A debug-size model fine-tuned from our pre-training vs random.

  # 1. records and ~30 min of debug-size pre-training (its flags:
  #    docs/studies/2026-11-21-debug-model-pretrained-vs-random.md)
  # 2. both arms, then the side-by-side table:
  python -m experiments.exp_transfer --data-dir EXP --arm random
  python -m experiments.exp_transfer --data-dir EXP --arm pretrained \
      --init-checkpoint EXP/models/electra_debug/export
  python -m experiments.exp_transfer --data-dir EXP --table

An experiment run by hand, never in CI. EXP/finetuning_data/ must hold the GLUE folders
(CoLA, SST-2, MRPC, STS-B, RTE) and chunk/ (CoNLL-2000); --squad-file splits the SQuAD
1.1 dev file by article into EXP/finetuning_data/squadv1/{train,dev}.json (the first
--squad-train-articles articles train, the rest evaluate). Each task runs through
run_finetuning.py with the recipe's hyperparameters (configs/finetuning/debug.json) and
the shortened schedules in SCHEDULES, the same for both arms; GLUE tasks run --trials
seeds and report the median.
"""

import argparse
import json
import os
import subprocess
import sys

from bench import ROOT
from util import cli, hparams

# Each arm's results live under <data-dir>/models/<name>; --pretrained-name keeps a
# second pre-trained model's fine-tuning runs apart from the first's.
ARMS = {"pretrained": "electra_debug", "random": "random_debug"}

# Shorter than the recipe to fit a 2-core CPU, identical for both arms. SST-2 and CoLA
# lose no tokens at length 64 and STS-B 3.4% of pairs a few; MRPC and RTE keep 128.
SCHEDULES = {
    "glue/sst2": {"max_seq_length": 64, "num_train_epochs": 0.5},
    "glue/cola": {"max_seq_length": 64, "num_train_epochs": 3.0},
    "glue/stsb": {"max_seq_length": 64, "num_train_epochs": 3.0},
    "glue/mrpc": {"max_seq_length": 128, "num_train_epochs": 3.0},
    "glue/rte": {"max_seq_length": 128, "num_train_epochs": 3.0},
    "squad/v1.1": {"max_seq_length": 256, "doc_stride": 128, "num_train_epochs": 2.0,
                   "num_trials": 1},
    "chunk": {"max_seq_length": 128, "num_train_epochs": 3.0, "num_trials": 1},
}


def split_squad(squad_file: str, data_dir: str, train_articles: int,
                max_train_questions: int = 0):
  """The first `train_articles` articles train (only their first `max_train_questions`
  questions, if given), the rest evaluate."""
  with open(squad_file, encoding="utf-8") as f:
    document = json.load(f)
  folder = os.path.join(data_dir, "finetuning_data", "squadv1")
  os.makedirs(folder, exist_ok=True)
  parts = {"train": document["data"][:train_articles],
           "dev": document["data"][train_articles:]}
  if max_train_questions:
    parts["train"] = first_questions(parts["train"], max_train_questions)
  for split, articles in parts.items():
    with open(os.path.join(folder, f"{split}.json"), "w", encoding="utf-8") as f:
      json.dump({"version": document.get("version", "1.1"), "data": articles}, f)
    count = sum(len(p["qas"]) for a in articles for p in a["paragraphs"])
    print(f"squad {split}: {len(articles)} articles, {count} questions")


def first_questions(articles, count: int):
  """The articles cut after their first `count` questions."""
  kept = []
  for article in articles:
    paragraphs = []
    for paragraph in article["paragraphs"]:
      questions = paragraph["qas"][:count]
      count -= len(questions)
      if questions:
        paragraphs.append({**paragraph, "qas": questions})
    if paragraphs:
      kept.append({**article, "paragraphs": paragraphs})
  return kept


def run_arm(args):
  for task in args.tasks:
    overrides = {"model_size": "debug", "num_trials": args.trials, "seed": args.seed,
                 **SCHEDULES[task]}
    command = [sys.executable, os.path.join(ROOT, "run_finetuning.py"), "--task", task,
               "--model-name", args.names[args.arm], "--data-dir", args.data_dir,
               "--hparams", json.dumps(overrides)]
    if args.init_checkpoint:
      command += ["--init-checkpoint", args.init_checkpoint]
    print("$", " ".join(command), flush=True)
    subprocess.run(command, check=True)


def similarity(data_dir: str, init_checkpoint: str, count: int = 256):
  """How alike the encoder's outputs are across inputs before fine-tuning: the mean
  pairwise cosine of [CLS] vectors over SST-2 dev sentences, and of the real tokens'
  vectors within each sentence. Near 1 means the input barely shows in the output."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tf_keras  # pylint: disable=g-import-not-at-top
  from data_prep.tokenizer import Tokenizer  # pylint: disable=g-import-not-at-top
  from data_prep.vocab import load_vocab  # pylint: disable=g-import-not-at-top
  from finetune import tasks  # pylint: disable=g-import-not-at-top
  from finetune.sentence.data import encode  # pylint: disable=g-import-not-at-top
  from model.config import ModelConfig  # pylint: disable=g-import-not-at-top
  from model.encoder import ElectraEncoder  # pylint: disable=g-import-not-at-top
  from runs.pretrained import open_weights  # pylint: disable=g-import-not-at-top

  def mean_cosine(vectors, mask=None):
    unit = vectors / np.linalg.norm(vectors, axis=-1, keepdims=True)
    cos = unit @ np.swapaxes(unit, -1, -2)
    pairs = np.ones(cos.shape[-2:], bool) if mask is None else mask[:, :, None] & \
        mask[:, None, :]
    pairs = pairs & ~np.eye(cos.shape[-1], dtype=bool)
    return float((cos * pairs).sum() / pairs.sum())

  examples = tasks.read_examples(tasks.get_task("glue/sst2"), data_dir, "dev")[:count]
  features = encode(Tokenizer(load_vocab(os.path.join(data_dir, "vocab.txt"))), examples,
                    64)
  inputs = {k: features[k] for k in ("input_ids", "input_mask", "segment_ids")}
  arms = {"pretrained": init_checkpoint, "random": ""}
  for arm, path in arms.items():
    tf_keras.utils.set_random_seed(0)  # the random arm's weights, the same every run
    weights = open_weights(path) if path else None
    config = weights.model_config("discriminator") if weights else \
        ModelConfig.from_size("debug")
    encoder = ElectraEncoder(config)
    encoder({k: v[:1] for k, v in inputs.items()})  # creates the variables
    if weights:
      weights.load_encoder(encoder)
    hidden = np.asarray(encoder(inputs, training=False), np.float64)
    print(f"{arm}: [CLS] across sentences {mean_cosine(hidden[:, 0]):.3f}, tokens within "
          f"a sentence {mean_cosine(hidden, inputs['input_mask'].astype(bool)):.3f}")


def table(data_dir: str, names) -> str:
  from finetune import config as finetune_config  # pylint: disable=g-import-not-at-top
  rows = ["| task | metric | pre-trained: median (trials) | random init: median "
          "(trials) |", "|---|---|---|---|"]
  for task in SCHEDULES:
    reports = {}
    for arm, name in names.items():
      path = finetune_config.load_config(name, [task], data_dir).results_file("json")
      if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
          reports[arm] = json.load(f)["summary"]
    keys = sorted({k for r in reports.values() for k in r})
    for key in keys:
      cells = []
      for arm in ARMS:
        value = reports.get(arm, {}).get(key)
        cells.append("not run" if value is None else f"{value['median']:.2f} (" + ", ".join(
            f"{t:.2f}" for t in value["trials"]) + ")")
      rows.append(f"| {task} | {key.split(' ')[-1]} | {cells[0]} | {cells[1]} |")
  return "\n".join(rows)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--data-dir", required=True)
  parser.add_argument("--arm", choices=sorted(ARMS))
  parser.add_argument("--init-checkpoint", default="")
  parser.add_argument("--pretrained-name", default=ARMS["pretrained"],
                      help="model name of the pre-trained arm's runs and results")
  parser.add_argument("--tasks", default=",".join(SCHEDULES))
  parser.add_argument("--trials", type=int, default=3)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--squad-file", default="")
  parser.add_argument("--squad-train-articles", type=int, default=38)
  parser.add_argument("--similarity", action="store_true",
                      help="print how alike each arm's encoder outputs are")
  parser.add_argument("--table", action="store_true", help="print the results table")
  args = parser.parse_args()
  cli.check_flags(parser, args, trials={"at_least": 1}, seed=hparams.SEED,
                  squad_train_articles={"at_least": 1})
  args.tasks = [t for t in args.tasks.split(",") if t]
  args.names = {**ARMS, "pretrained": args.pretrained_name}
  if args.squad_file:
    split_squad(args.squad_file, args.data_dir, args.squad_train_articles)
  if args.arm:
    run_arm(args)
  if args.similarity and not args.init_checkpoint:
    parser.error("--similarity compares the --init-checkpoint encoder with a random one")
  if args.similarity:
    similarity(args.data_dir, args.init_checkpoint)
  if args.table:
    print(table(args.data_dir, args.names))


if __name__ == "__main__":
  main()
