"""Fine-tuning throughput: electra_small, seq 128, batch 32, ours vs Hugging Face PyTorch.

  python bench/bench_finetuning.py [--steps 30] [--warmup 5] [--rounds 2]

Runs by hand, never in CI. Each implementation runs in its own subprocess (so peak RSS
is its own), alternating for --rounds rounds, on random token ids (speed does not depend
on the weights). Ours is the real training step of run_finetuning.py: the shared
TrainLoop with the AdamW optimizer, layer-wise learning rates, dropout and a
classification head. The peer is transformers' ElectraForSequenceClassification with
torch.optim.AdamW and gradient clipping at 1.0; it must be installed for the benchmark
only: pip install torch==2.13.0 transformers==5.23.0
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BATCH, SEQ, VOCAB = 32, 128, 30522


def random_batch(np, seed=0):
  rng = np.random.default_rng(seed)
  ids = rng.integers(1000, VOCAB, (BATCH, SEQ)).astype(np.int32)
  return {"input_ids": ids, "input_mask": np.ones_like(ids),
          "segment_ids": np.zeros_like(ids), "label": rng.integers(0, 2, BATCH)}


def run_ours(steps: int, warmup: int, xla: bool, precision: str = "float32") -> float:
  sys.path.insert(0, ROOT)
  import numpy as np
  import tensorflow as tf
  from finetune.modeling import FinetuningModel
  from finetune.sentence.head import SentenceHead
  from model.config import ModelConfig
  from training.loop import LoopSettings, TrainLoop
  from training.optimization import create_optimizer
  from training.runtime import set_precision

  set_precision(precision)
  batch = random_batch(np)
  batch["label"] = batch["label"].astype(np.float32)
  model = FinetuningModel(ModelConfig.from_size("small"), {"task": SentenceHead(2)})
  model.build_variables(seq_length=SEQ)
  optimizer = create_optimizer(3e-4, 10000, 1000, 0.01,
                               lr_multiplier=model.lr_multiplier(0.8))

  def loss_fn(features, step, replica_id, micro_step):
    logits = model(features, training=True)["task"]
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        tf.cast(features["label"], tf.int32), logits))
    return loss * BATCH, {}

  with tempfile.TemporaryDirectory() as model_dir:
    settings = LoopSettings(model_dir=model_dir, num_train_steps=warmup,
                            save_checkpoints_steps=10**9, log_every_steps=10**9,
                            use_xla=xla)
    loop = TrainLoop(tf.distribute.get_strategy(), model, optimizer, loss_fn, settings)
    dataset_fn = lambda ctx: tf.data.Dataset.from_tensors(batch).repeat()
    loop.run(dataset_fn)
    settings.num_train_steps = warmup + steps
    start = time.perf_counter()
    loop.run(dataset_fn)
    return time.perf_counter() - start


def run_hf(steps: int, warmup: int) -> float:
  import numpy as np
  import torch
  from transformers import ElectraConfig, ElectraForSequenceClassification

  batch = {k: torch.from_numpy(v.astype(np.int64)) for k, v in random_batch(np).items()}
  config = ElectraConfig(vocab_size=VOCAB, embedding_size=128, hidden_size=256,
                         num_hidden_layers=12, num_attention_heads=4,
                         intermediate_size=1024, num_labels=2)
  model = ElectraForSequenceClassification(config).train()
  optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, eps=1e-6,
                                weight_decay=0.01)

  def step():
    out = model(input_ids=batch["input_ids"], attention_mask=batch["input_mask"],
                token_type_ids=batch["segment_ids"], labels=batch["label"])
    optimizer.zero_grad()
    out.loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()

  for _ in range(warmup):
    step()
  start = time.perf_counter()
  for _ in range(steps):
    step()
  return time.perf_counter() - start


def child(impl: str, steps: int, warmup: int):
  if impl == "hf":
    seconds = run_hf(steps, warmup)
  else:
    seconds = run_ours(steps, warmup, impl == "ours_xla",
                       "mixed_bfloat16" if impl == "ours_bf16" else "float32")
  peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
  print(json.dumps({"impl": impl, "examples_per_s": steps * BATCH / seconds,
                    "seconds": seconds, "peak_rss_mib": peak_mib}))


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--steps", type=int, default=30)
  parser.add_argument("--warmup", type=int, default=5)
  parser.add_argument("--rounds", type=int, default=2)
  parser.add_argument("--impls", default="ours,ours_xla,hf",
                      help="of ours, ours_xla, ours_bf16 (mixed_bfloat16), hf")
  parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.child:
    return child(args.child, args.steps, args.warmup)
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
  results = []
  for round_ in range(args.rounds):
    for impl in args.impls.split(","):
      out = subprocess.run([sys.executable, __file__, "--child", impl, "--steps",
                            str(args.steps), "--warmup", str(args.warmup)],
                           capture_output=True, text=True, env=env, check=True)
      result = json.loads(out.stdout.strip().splitlines()[-1])
      results.append(result)
      print(f"round {round_ + 1} {impl:9s} {result['examples_per_s']:8.1f} examples/s "
            f"peak RSS {result['peak_rss_mib']:7.0f} MiB", flush=True)
  print(f"\nelectra_small fine-tuning, batch {BATCH} x seq {SEQ}, {os.cpu_count()} CPUs, "
        f"best of {args.rounds} rounds:")
  figures = {}
  for impl in args.impls.split(","):
    mine = [r for r in results if r["impl"] == impl]
    figures[impl] = {"examples_per_s": round(max(r["examples_per_s"] for r in mine), 2),
                     "peak_rss_mib": round(max(r["peak_rss_mib"] for r in mine))}
    print(f"| {impl} | {figures[impl]['examples_per_s']:.1f} examples/s | "
          f"{figures[impl]['peak_rss_mib']} MiB peak RSS |")
  print(json.dumps(figures))


if __name__ == "__main__":
  main()
