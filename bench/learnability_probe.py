"""The learnability probe: how many steps until pre-training uses a neighbour's token.

  python bench/learnability_probe.py --work-dir /tmp/probe \
      --arm default='{}' --arm mimetic='{"init_scheme": "mimetic"}' [--steps 600]

A synthetic corpus where every word has one fixed successor (a random cycle through
--num-words made-up words), so a masked word is a fixed function of its left (and of its
right) neighbour: a model that attends to a neighbour and learns the map gets masked-LM
accuracy 1, one that does not stays at the copy level (~0.15 + 0.85 / num_words). The
corpus and its vocabulary (the special tokens and the words) are made here, the records
by build_pretraining_dataset.py. Each arm pre-trains the tiny recipe (the model of
configs/pretraining/tiny.json, --hparams on top) with run_pretraining.py, keeps a
checkpoint every --eval-every steps and evaluates each one (masked-LM accuracy and
disc_auc on --eval-batches held-out batches). Reported per arm: the first evaluated step
at which masked_lm_accuracy >= 0.9 and disc_auc >= 0.9. Re-running resumes (records,
runs and evaluations that exist are kept).
"""

import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from util.files import atomic_write  # pylint: disable=wrong-import-position

SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
# The tiny recipe's model at the probe's batch; arms add their --hparams on top.
PROBE_HPARAMS = {"model_size": "tiny", "train_batch_size": 32, "eval_batch_size": 64,
                 "log_every_steps": 10, "keep_checkpoint_max": 10000, "do_eval": False}
THRESHOLD = 0.9
EVAL_NAME = "probe_eval.jsonl"


def made_up_words(count: int, rng) -> list:
  """`count` distinct lower-case words of 2-3 consonant-vowel syllables."""
  consonants, vowels = "bdfgklmnprstvz", "aeiou"
  words = set()
  while len(words) < count:
    syllables = rng.integers(2, 4)
    words.add("".join(consonants[rng.integers(len(consonants))] +
                      vowels[rng.integers(len(vowels))] for _ in range(syllables)))
  return sorted(words)


def write_corpus(folder: str, num_words: int, num_documents: int, seed: int = 0):
  """corpus/successors.txt and vocab.txt in `folder`: documents of 40 ten-word
  sentences walking a random cycle through the words from a random start."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(seed)
  words = made_up_words(num_words, rng)
  order = rng.permutation(num_words)
  successor = {words[order[i]]: words[order[(i + 1) % num_words]]
               for i in range(num_words)}
  lines = []
  for _ in range(num_documents):
    word = words[rng.integers(num_words)]
    for _ in range(40):
      sentence = []
      for _ in range(10):
        sentence.append(word)
        word = successor[word]
      lines.append(" ".join(sentence) + "\n")
    lines.append("\n")
  os.makedirs(os.path.join(folder, "corpus"), exist_ok=True)
  with atomic_write(os.path.join(folder, "corpus", "successors.txt")) as f:
    f.writelines(lines)
  with atomic_write(os.path.join(folder, "vocab.txt")) as f:
    f.write("".join(t + "\n" for t in (*SPECIALS, *words)))


def build_records(folder: str, max_seq_length: int):
  records = os.path.join(folder, "pretrain_tfrecords")
  if os.path.isdir(records) and os.listdir(records):
    return
  subprocess.run([sys.executable, os.path.join(ROOT, "build_pretraining_dataset.py"),
                  "--corpus-dir", os.path.join(folder, "corpus"),
                  "--vocab-file", os.path.join(folder, "vocab.txt"),
                  "--output-dir", records, "--max-seq-length", str(max_seq_length),
                  "--no-progress"], check=True)


def pretrain(data_dir: str, name: str, hparams: dict):
  subprocess.run([sys.executable, os.path.join(ROOT, "run_pretraining.py"),
                  "--model-name", name, "--data-dir", data_dir,
                  "--hparams", json.dumps(hparams)], check=True)


def evaluate_checkpoints(data_dir: str, name: str, hparams: dict, eval_batches: int):
  """Evaluates each kept checkpoint not yet in <model_dir>/probe_eval.jsonl (in this
  process: one TensorFlow start for all of them); returns every row, by step."""
  from pretrain import trainer  # pylint: disable=import-outside-toplevel
  from pretrain.config import load_config  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  config = load_config(name, data_dir, {**hparams, "num_eval_steps": eval_batches,
                                        "do_eval": True})
  log = os.path.join(config.model_dir, EVAL_NAME)
  rows = {}
  if os.path.exists(log):
    with open(log, encoding="utf-8") as f:
      rows = {r["global_step"]: r for r in map(json.loads, f)}
  state = tf.train.get_checkpoint_state(config.model_dir)
  paths = [p for p in state.all_model_checkpoint_paths
           if int(p.rsplit("-", 1)[1]) not in rows]
  if paths:
    evaluator = trainer.Pretrainer(config)
    for path in paths:
      row = evaluator.evaluate(checkpoint=path, write=False)
      rows[row["global_step"]] = row
      with open(log, "a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")
  return [rows[s] for s in sorted(rows)]


def first_step(rows, metric: str, threshold: float = THRESHOLD):
  return next((r["global_step"] for r in rows if r[metric] >= threshold), None)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--work-dir", required=True)
  parser.add_argument("--arm", action="append", required=True,
                      help="NAME=JSON: an arm and its --hparams over the probe's")
  parser.add_argument("--steps", type=int, default=600)
  parser.add_argument("--eval-every", type=int, default=25)
  parser.add_argument("--eval-batches", type=int, default=4)
  parser.add_argument("--num-words", type=int, default=600)
  parser.add_argument("--num-documents", type=int, default=2000)
  parser.add_argument("--max-seq-length", type=int, default=128)
  args = parser.parse_args()

  data_dir = os.path.abspath(args.work_dir)
  if not os.path.exists(os.path.join(data_dir, "vocab.txt")):
    write_corpus(data_dir, args.num_words, args.num_documents)
  build_records(data_dir, args.max_seq_length)
  summary = {}
  for arm in args.arm:
    name, _, extra = arm.partition("=")
    hparams = {**PROBE_HPARAMS, "max_seq_length": args.max_seq_length,
               "num_train_steps": args.steps, "save_checkpoints_steps": args.eval_every,
               **json.loads(extra or "{}")}
    pretrain(data_dir, f"probe_{name}", hparams)
    rows = evaluate_checkpoints(data_dir, f"probe_{name}", hparams, args.eval_batches)
    summary[name] = {"steps_to_mlm_0.9": first_step(rows, "masked_lm_accuracy"),
                     "steps_to_auc_0.9": first_step(rows, "disc_auc"),
                     "curve": [(r["global_step"], round(r["masked_lm_accuracy"], 3),
                                round(r.get("disc_auc", float("nan")), 3)) for r in rows]}
    print(f"RESULT {name} {json.dumps(summary[name])}", flush=True)
  with atomic_write(os.path.join(data_dir, "probe_summary.json")) as f:
    json.dump(summary, f, indent=1)


if __name__ == "__main__":
  main()
