"""float32 against mixed_bfloat16 on this CPU: pre-training and fine-tuning steps side by side.

  python -m bench.bench_bf16 [--pretrain-batch 32] [--pretrain-steps 2] \
      [--finetune-steps 3] [--finetune-warmup 2] [--rounds 1] [--threads 2]

Runs by hand, never in CI. Each configuration runs in its own process (bench/child.py:
peak RSS is its own), float32 and mixed_bfloat16 alternating within each round: the
electra_small pre-training step of bench_pretraining (seq 128) and the fine-tuning step
of bench_finetuning (batch 32 x seq 128, "ours" in float32 and bfloat16), on any CPU
(bfloat16 without its arithmetic too: how slow it is there). Prints the CPU's bf16
flags, one line per process, a table and, last, one JSON line of the figures (the best
round of each configuration) with the bf16 speed-ups.

  python -m bench.bench_bf16 --ops   # where bf16 loses: single ops, float32 vs bfloat16
"""

import argparse
import json
import os
import sys

from bench import bench_finetuning, bench_pretraining, child, peers
from util import cli, cpu

BF16_FLAGS = ("avx512f", "avx512_bf16", "amx_bf16", "amx_tile")
PRECISIONS = tuple(peers.POLICIES.values())  # Keras policies: float32, mixed_bfloat16


def cpu_flags() -> dict:
  """Which of BF16_FLAGS the CPU has (util/cpu.py reads it), and its model name."""
  info = cpu.cpu_info()
  return {"cpu": info.model, **{flag: flag in info.flags for flag in BF16_FLAGS}}


def time_ops(threads: int) -> dict:
  """Best-of-5 seconds of the encoder's main ops (electra_small, batch 8 x 128) in
  float32 and bfloat16, in this process."""
  os.environ["TF_NUM_INTRAOP_THREADS"] = str(threads)
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import time  # pylint: disable=g-import-not-at-top
  x, w = tf.random.normal([1024, 256]), tf.random.normal([256, 1024])
  heads, wide = tf.random.normal([8, 4, 128, 64]), tf.random.normal([1024, 1024])
  gelu = lambda a: 0.5 * a * (1 + tf.math.erf(a / 2**0.5))
  scores = lambda a: tf.einsum("bhqd,bhkd->bhqk", a, a)

  def with_gradient(fn):
    def both(*args):
      with tf.GradientTape() as tape:
        tape.watch(args)
        y = tf.reduce_sum(tf.cast(fn(*args), tf.float32))
      return tape.gradient(y, args)
    return both
  ops = {"matmul 1024x256 @ 256x1024": (tf.matmul, (x, w)),
         "matmul, forward + backward": (with_gradient(tf.matmul), (x, w)),
         "attention scores (batched matmul)": (scores, (heads,)),
         "attention scores, forward + backward": (with_gradient(scores), (heads,)),
         "softmax of the scores": (lambda a: tf.nn.softmax(scores(a)), (heads,)),
         "erf GELU 1024x1024": (gelu, (wide,))}
  seconds = {}
  for name, (fn, args) in ops.items():
    for dtype in (tf.float32, tf.bfloat16):
      compiled, cast = tf.function(fn), [tf.cast(a, dtype) for a in args]
      tf.nest.map_structure(lambda t: t.numpy(), compiled(*cast))
      runs = []
      for _ in range(5):
        start = time.perf_counter()
        tf.nest.map_structure(lambda t: t.numpy(), compiled(*cast))
        runs.append(time.perf_counter() - start)
      seconds[name, dtype.name] = min(runs)
    ratio = seconds[name, "bfloat16"] / seconds[name, "float32"]
    print(f"| {name} | {1e3 * seconds[name, 'float32']:.1f} ms | "
          f"{1e3 * seconds[name, 'bfloat16']:.1f} ms | {ratio:.1f}x |", flush=True)
  return {name: round(seconds[name, "bfloat16"] / seconds[name, "float32"], 2)
          for name in ops}


def parse_args(argv=None) -> argparse.Namespace:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--pretrain-batch", type=int, default=32)
  parser.add_argument("--pretrain-steps", type=int, default=2)
  parser.add_argument("--finetune-steps", type=int, default=3)
  parser.add_argument("--finetune-warmup", type=int, default=2)
  parser.add_argument("--rounds", type=int, default=1)
  parser.add_argument("--threads", type=int, default=2)
  parser.add_argument("--ops", action="store_true",
                      help="time single ops instead of training steps")
  args = parser.parse_args(argv)
  cli.check_flags(parser, args, pretrain_batch={"at_least": 1},
                  pretrain_steps={"at_least": 1}, finetune_steps={"at_least": 1},
                  finetune_warmup={"at_least": 1}, rounds={"at_least": 1},
                  threads={"at_least": 1})
  return args


def main(argv=None) -> int:
  args = parse_args(argv)
  return cli.run_command(lambda: (time_ops_table if args.ops else compare)(args))


def time_ops_table(args: argparse.Namespace) -> int:
  print(json.dumps(cpu_flags()))
  print("| op | float32 | bfloat16 | bf16 / float32 |\n|---|---|---|---|")
  print(json.dumps({"threads": args.threads, "bf16_time_ratio": time_ops(args.threads)}))
  return 0


def compare(args: argparse.Namespace) -> int:
  """Both steps in both precisions, each round; then the table of the best rounds."""
  flags = cpu_flags()
  print(json.dumps(flags), flush=True)
  runs = {("pretraining", p): [] for p in PRECISIONS}
  runs.update({("finetuning", p): [] for p in PRECISIONS})
  for round_ in range(args.rounds):
    for precision in PRECISIONS:
      result = child.measure(bench_pretraining.run_ours, {
          "batch_size": args.pretrain_batch, "steps": args.pretrain_steps,
          "mixed_precision": precision}, args.threads)
      runs["pretraining", precision].append(
          {"steps_per_s": result["steps_per_s"], "peak_rss_mib": result["peak_rss_mib"]})
      print(f"round {round_ + 1} pretraining {precision:14s} {result['steps_per_s']:.4f} "
            f"steps/s peak RSS {result['peak_rss_mib']} MiB", flush=True)
    for row_precision, precision in peers.POLICIES.items():
      result = child.measure(bench_finetuning.run_impl, {
          "impl": "ours", "precision": row_precision, "steps": args.finetune_steps,
          "warmup": args.finetune_warmup, "threads": args.threads, "clock": "wall"},
          args.threads)
      runs["finetuning", precision].append(
          {"steps_per_s": result["examples_per_s"] / 32,
           "peak_rss_mib": round(result["peak_rss_mib"])})
      print(f"round {round_ + 1} finetuning  {precision:14s} "
            f"{result['examples_per_s'] / 32:.4f} steps/s peak RSS "
            f"{round(result['peak_rss_mib'])} MiB", flush=True)

  figures = {"threads": args.threads, **flags}
  batches = {"pretraining": args.pretrain_batch, "finetuning": 32}
  print(f"\nelectra_small, seq 128, {args.threads} threads, best of {args.rounds} round(s):")
  print("| step | batch | precision | steps/s | peak RSS MiB |")
  print("|---|---|---|---|---|")
  for (phase, precision), results in runs.items():
    best = {"steps_per_s": round(max(r["steps_per_s"] for r in results), 4),
            "peak_rss_mib": max(r["peak_rss_mib"] for r in results)}
    figures[f"{phase}_{precision}"] = {"batch": batches[phase], **best}
    print(f"| {phase} | {batches[phase]} | {precision} | {best['steps_per_s']} | "
          f"{best['peak_rss_mib']} |")
  for phase in batches:
    speedup = (figures[f"{phase}_mixed_bfloat16"]["steps_per_s"] /
               figures[f"{phase}_float32"]["steps_per_s"])
    figures[f"{phase}_bf16_speedup"] = round(speedup, 3)
    print(f"{phase}: mixed_bfloat16 / float32 = {speedup:.3f}x")
  print(json.dumps(figures))
  return 0


if __name__ == "__main__":
  sys.exit(main())
