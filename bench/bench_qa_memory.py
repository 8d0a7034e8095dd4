"""Peak memory of SQuAD fine-tuning: electra_small, seq 512, by batch size and accumulation.

  python bench/bench_qa_memory.py [--settings 8x1,16x1,32x1,32x4] [--steps 3]

Runs by hand, never in CI. Each setting BATCHxACCUMULATION runs in its own subprocess
(so its peak RSS, from getrusage, is its own): the real training step of
run_finetuning.py for SQuAD (the shared TrainLoop, AdamW with layer-wise learning rates,
the joint span head with the answerability classifier and its loss) on random token ids
and answer positions, for --steps steps. gradient_accumulation_steps splits each batch
into micro-batches whose gradients are summed, so the activations held at once are
those of batch / accumulation examples. Prints one JSON line per setting.
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
SEQ, VOCAB = 512, 30522


def run_setting(batch: int, accumulation: int, steps: int, recompute: bool) -> dict:
  sys.path.insert(0, ROOT)
  import numpy as np
  import tensorflow as tf
  from finetune.modeling import FinetuningModel
  from finetune.qa.head import SpanHead, span_loss
  from model.config import ModelConfig
  from model.encoder import use_recompute
  from training.loop import LoopSettings, TrainLoop
  from training.optimization import create_optimizer
  from training.runtime import use_checkpointed_dropout

  use_checkpointed_dropout(0)  # as run_finetuning.py
  rng = np.random.default_rng(0)
  ids = rng.integers(1000, VOCAB, (batch, SEQ)).astype(np.int32)
  segments = np.zeros_like(ids)
  segments[:, 64:] = 1  # a question, then the context
  starts = rng.integers(64, SEQ - 30, batch).astype(np.int32)
  features = {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": segments,
              "start_positions": starts, "end_positions": starts + 5,
              "is_impossible": np.zeros(batch, np.int32)}
  model = FinetuningModel(ModelConfig.from_size("small"), {"squad": SpanHead()})
  model.build_variables({k: v[:1] for k, v in features.items()})
  use_recompute(model, recompute)
  optimizer = create_optimizer(3e-4, 10000, 1000, 0.01,
                               lr_multiplier=model.lr_multiplier(0.8))

  def loss_fn(batch_features, step, replica_id, micro_step):
    del step, replica_id, micro_step
    outputs = model(batch_features, training=True)["squad"]
    return tf.reduce_mean(span_loss(outputs, batch_features, 0.5)) * batch, {}

  dataset = tf.data.Dataset.from_tensors(features).repeat()
  with tempfile.TemporaryDirectory() as model_dir:
    settings = LoopSettings(
        model_dir=model_dir, num_train_steps=1, save_checkpoints_steps=10**9,
        log_every_steps=10**9, gradient_accumulation_steps=accumulation)
    loop = TrainLoop(tf.distribute.get_strategy(), model, optimizer, loss_fn, settings)
    loop.run(lambda context: dataset)  # the first step traces the graph
    settings.num_train_steps = 1 + steps
    start = time.perf_counter()
    loop.run(lambda context: dataset)
    seconds = (time.perf_counter() - start) / steps
  return {"batch": batch, "accumulation": accumulation, "seq": SEQ, "recompute": recompute,
          "seconds_per_step": round(seconds, 2),
          "peak_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss /
                                2**20, 2)}


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--settings", default="8x1,16x1,32x1,32x4",
                      help="comma-separated BATCHxACCUMULATION")
  parser.add_argument("--steps", type=int, default=3)
  parser.add_argument("--recompute", action="store_true",
                      help="gradient checkpointing of the transformer layers")
  parser.add_argument("--child", help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.child:
    batch, accumulation = map(int, args.child.split("x"))
    print(json.dumps(run_setting(batch, accumulation, args.steps, args.recompute)))
    return
  for setting in args.settings.split(","):
    run = subprocess.run([sys.executable, __file__, "--child", setting, "--steps",
                          str(args.steps)] + ["--recompute"] * args.recompute,
                         capture_output=True, text=True,
                         env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    lines = run.stdout.strip().splitlines()
    print(lines[-1] if run.returncode == 0 and lines else
          json.dumps({"setting": setting, "error": run.stderr.strip()[-300:]}))


if __name__ == "__main__":
  main()
