"""The learnability probe: how many steps until pre-training uses a neighbour's token.

  python -m experiments.learnability_probe --work-dir /tmp/probe \
      --arm default='{}' --arm mimetic='{"init_scheme": "mimetic"}' [--steps 600]

A synthetic corpus where every word has one fixed successor (a random cycle through
--num-words made-up words), so a masked word is a fixed function of its left (and of its
right) neighbour: a model that attends to a neighbour and learns the map gets masked-LM
accuracy 1, one that does not stays at the copy level (~0.15 + 0.85 / num_words). The
corpus and its vocabulary (the special tokens and the words) are made here, the records
by build_pretraining_dataset.py. Each arm pre-trains the tiny recipe (the model of
configs/pretraining/tiny.json, --hparams on top) with run_pretraining.py's main in this
process, keeps a checkpoint every --eval-every steps and evaluates each one
(tools.eval_checkpoints: masked-LM accuracy and disc_auc on --eval-batches batches).
The arm named "hf" is the peer: transformers' PyTorch ELECTRA at the same sizes on the
same records. Reported per arm: the first evaluated step at which masked_lm_accuracy >=
0.9 and disc_auc >= 0.9. Re-running resumes (records, runs and evaluations that exist
are kept).
"""

import argparse
import json
import os
import subprocess
import sys

import run_pretraining
from bench import ROOT
from tools.eval_checkpoints import evaluate_checkpoints
from training.curves import EVAL_CURVE_NAME
from util.files import atomic_write

SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
# The tiny recipe's model at the probe's batch; arms add their --hparams on top.
PROBE_HPARAMS = {"model_size": "tiny", "train_batch_size": 32, "eval_batch_size": 64,
                 "log_every_steps": 10, "keep_checkpoint_max": 10000, "do_eval": False}
THRESHOLD = 0.9
PEER = "hf"  # the arm name that runs transformers' PyTorch ELECTRA (train_peer)


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
  """run_pretraining.py's run in this process: TensorFlow, which the evaluation loads
  here anyway, starts once for every arm. A refusal or Ctrl-C ends the probe with the
  run's exit status (its one line says why)."""
  code = run_pretraining.main(["--model-name", name, "--data-dir", data_dir,
                               "--hparams", json.dumps(hparams)])
  if code:
    sys.exit(code)


def read_records(data_dir: str, max_seq_length: int):
  """Every record of <data_dir>/pretrain_tfrecords as int64 arrays, in file order."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from data_prep import records  # pylint: disable=import-outside-toplevel
  files = sorted(tf.io.gfile.glob(os.path.join(data_dir, "pretrain_tfrecords", "*")))
  spec = records.feature_spec(max_seq_length, None)
  rows = [tf.io.parse_single_example(r, spec) for r in tf.data.TFRecordDataset(files)]
  return {k: np.stack([r[k].numpy() for r in rows]) for k in spec}


def train_peer(data_dir: str, hparams: dict, eval_batches: int, log_path: str):
  """transformers' PyTorch ELECTRA on the same records: the tiny recipe's sizes (a
  generator of half the width sharing the embeddings), the original's masking (15%,
  85% [MASK], 15% kept), Gumbel-max samples, loss = MLM + 50 x replaced-token
  detection, torch AdamW (decay off for LayerNorm and biases; torch's Adam has bias
  correction, the original's has none) with the same warmup and linear decay, clipping
  1.0, one thread. Evaluated every save_checkpoints_steps steps on the first
  eval_batches x eval_batch_size records, as ours (AUC over every position, padding as
  label 0 with probability 0); returns the rows, written to `log_path`."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  import torch  # pylint: disable=import-outside-toplevel
  import transformers  # pylint: disable=import-outside-toplevel
  from sklearn.metrics import roc_auc_score  # pylint: disable=import-outside-toplevel
  from data_prep.vocab import load_vocab  # pylint: disable=import-outside-toplevel
  torch.set_num_threads(1)
  torch.manual_seed(0)
  rng = np.random.default_rng(0)
  vocab = load_vocab(os.path.join(data_dir, "vocab.txt"))
  seq = hparams["max_seq_length"]
  data = read_records(data_dir, seq)
  sizes = {"hidden_size": 128, "num_hidden_layers": 4, "intermediate_size": 512,
           "num_attention_heads": 2}  # configs/model_sizes.json "tiny"
  common = dict(vocab_size=len(vocab), embedding_size=128, hidden_act="gelu",
                hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                max_position_embeddings=512, initializer_range=0.02)
  disc = transformers.ElectraForPreTraining(transformers.ElectraConfig(**common, **sizes))
  gen = transformers.ElectraForMaskedLM(transformers.ElectraConfig(
      **common, hidden_size=64, num_hidden_layers=4, intermediate_size=256,
      num_attention_heads=1))
  gen.electra.embeddings = disc.electra.embeddings
  gen.generator_lm_head.weight = disc.electra.embeddings.word_embeddings.weight
  params = {id(p): (n, p) for m in (disc, gen) for n, p in m.named_parameters()}
  no_decay = [p for n, p in params.values() if "LayerNorm" in n or n.endswith("bias")]
  decay = [p for n, p in params.values() if not ("LayerNorm" in n or n.endswith("bias"))]
  optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                                 {"params": no_decay, "weight_decay": 0.0}],
                                lr=hparams["learning_rate"], eps=1e-6)
  steps, warmup = hparams["num_train_steps"], hparams["num_warmup_steps"]
  schedule = torch.optim.lr_scheduler.LambdaLR(
      optimizer, lambda s: (1 - s / steps) * min(1.0, s / max(1, warmup)))
  max_predictions = int((0.15 + 0.005) * seq)
  specials = np.array([vocab.cls_id, vocab.sep_id, vocab.mask_id])

  def mask(ids, input_mask):
    masked, positions = ids.copy(), np.zeros([len(ids), max_predictions], np.int64)
    weights = np.zeros([len(ids), max_predictions], np.float32)
    for b in range(len(ids)):
      candidates = np.flatnonzero(input_mask[b] & ~np.isin(ids[b], specials))
      n = max(1, min(max_predictions, int(round(input_mask[b].sum() * 0.15))))
      chosen = rng.choice(candidates, min(n, len(candidates)), replace=False)
      positions[b, :len(chosen)], weights[b, :len(chosen)] = chosen, 1.0
      masked[b, chosen[rng.random(len(chosen)) < 0.85]] = vocab.mask_id
    return masked, positions, weights

  def forward(index):
    ids, input_mask = data["input_ids"][index], data["input_mask"][index].astype(bool)
    masked, positions, weights = mask(ids, input_mask)
    t = lambda x: torch.as_tensor(x)  # pylint: disable=unnecessary-lambda-assignment
    attention = t(input_mask.astype(np.int64))
    segments = t(data["segment_ids"][index])
    hidden = gen(input_ids=t(masked), attention_mask=attention, token_type_ids=segments,
                 output_hidden_states=True).hidden_states[-1]
    gathered = torch.gather(hidden, 1, t(positions)[..., None].expand(-1, -1,
                                                                       hidden.shape[-1]))
    logits = gen.generator_lm_head(gen.generator_predictions(gathered))
    targets = t(np.take_along_axis(ids, positions, 1))
    w = t(weights)
    token_loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2), targets,
                                                   reduction="none")
    mlm_loss = (token_loss * w).sum() / (w.sum() + 1e-6)
    uniform = torch.rand(logits.shape)
    sampled = (logits.detach() - torch.log(-torch.log(uniform + 1e-9) + 1e-9)).argmax(-1)
    corrupted = t(ids).clone().scatter_(1, t(positions), torch.where(
        w > 0, sampled, torch.gather(t(ids), 1, t(positions))))
    labels = (corrupted != t(ids)).float()
    disc_logits = disc(input_ids=corrupted, attention_mask=attention,
                       token_type_ids=segments).logits
    real = attention.float()
    disc_loss = (torch.nn.functional.binary_cross_entropy_with_logits(
        disc_logits, labels, reduction="none") * real).sum() / (real.sum() + 1e-6)
    accuracy = ((logits.argmax(-1) == targets).float() * w).sum() / (w.sum() + 1e-6)
    return mlm_loss + 50.0 * disc_loss, accuracy, disc_logits, labels, real

  batch, eval_batch = hparams["train_batch_size"], hparams["eval_batch_size"]
  eval_index = np.arange(eval_batches * eval_batch) % len(data["input_ids"])
  rows = []
  for step in range(1, steps + 1):
    loss, _, _, _, _ = forward(rng.integers(len(data["input_ids"]), size=batch))
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_([p for _, p in params.values()], 1.0)
    optimizer.step()
    schedule.step()
    if step % hparams["save_checkpoints_steps"] == 0 or step == steps:
      with torch.no_grad():
        outputs = [forward(eval_index[i:i + eval_batch])
                   for i in range(0, len(eval_index), eval_batch)]
      probs = np.concatenate([(torch.sigmoid(o[2]) * o[4]).numpy().ravel()
                              for o in outputs])
      labels = np.concatenate([(o[3] * o[4]).numpy().ravel() for o in outputs])
      rows.append({"global_step": step,
                   "masked_lm_accuracy": float(np.mean([o[1] for o in outputs])),
                   "disc_auc": float(roc_auc_score(labels, probs))})
      print(f"peer step {step}: {rows[-1]}", flush=True)
  with atomic_write(log_path) as f:
    f.writelines(json.dumps(r) + "\n" for r in rows)
  return rows


def first_step(rows, metric: str, threshold: float = THRESHOLD):
  return next((r["global_step"] for r in rows if r[metric] >= threshold), None)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--work-dir", required=True)
  parser.add_argument("--arm", action="append", required=True,
                      help="NAME=JSON: an arm and its --hparams over the probe's; the "
                      f"arm named {PEER!r} trains transformers' PyTorch ELECTRA")
  parser.add_argument("--steps", type=int, default=600)
  parser.add_argument("--eval-every", type=int, default=25)
  parser.add_argument("--eval-batches", type=int, default=4)
  parser.add_argument("--num-words", type=int, default=600)
  parser.add_argument("--num-documents", type=int, default=2000)
  parser.add_argument("--max-seq-length", type=int, default=128)
  args = parser.parse_args(argv)

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
    if name == PEER:
      from pretrain.config import load_config  # pylint: disable=import-outside-toplevel
      config = load_config("probe", data_dir, hparams).with_vocab_file_size()
      log = os.path.join(data_dir, "models", f"probe_{name}", EVAL_CURVE_NAME)
      if os.path.exists(log):
        with open(log, encoding="utf-8") as f:
          rows = [json.loads(line) for line in f]
      else:
        os.makedirs(os.path.dirname(log), exist_ok=True)
        rows = train_peer(data_dir, config.to_dict(), args.eval_batches, log)
    else:
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
