"""Each of model/fused.py's islands, forward and backward, at one transformer layer's
shapes: where the elementwise work of a training step goes.

  python -m bench.bench_islands [--batch-size 32] [--seq-length 128] [--hidden-size 256]
      [--heads 4] [--intermediate-size 1024] [--dropout 0.1] [--threads 2] [--calls 15]

Runs by hand, never in CI. Defaults: electra_small's fine-tuning shapes. Each island's
public function (dropout's key drawn inside the call, as the layer draws it) under a
GradientTape in a tf.function, the incoming gradients ones; the median of --calls calls
after 3, wall clock, in this process. Prints a table and, last, one JSON line (ms).
"""

import argparse
import json
import os
import time

from util import cli


def time_islands(batch: int, seq: int, hidden: int, heads: int, intermediate: int,
                 dropout: float, threads: int, calls: int) -> dict:
  os.environ["TF_NUM_INTRAOP_THREADS"] = str(threads)
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from model import dropout as dropout_lib, fused  # pylint: disable=g-import-not-at-top
  from training import runtime  # pylint: disable=g-import-not-at-top
  runtime.use_checkpointed_dropout(0)
  layer = dropout_lib.KeyedDropout(dropout)
  key = lambda: dropout_lib.dropout_key(layer)
  normal = lambda shape, seed: tf.random.stateless_normal(shape, [seed, 0])
  size = hidden // heads
  projections = [normal([batch, seq, heads, size], i) for i in range(3)]
  head_biases = [tf.zeros([heads, size]) for _ in range(3)]
  scores, mask = normal([batch, heads, seq, seq], 3), tf.ones([batch, seq, seq])
  x, residual = normal([batch, seq, hidden], 4), normal([batch, seq, hidden], 5)
  inner = normal([batch, seq, intermediate], 6)
  bias, gamma, beta = tf.zeros([hidden]), tf.ones([hidden]), tf.zeros([hidden])
  islands = {
      "q, k, v bias + scale + heads' transpose": (
          lambda *a: fused.qkv_heads(*a, *head_biases, size ** -0.5), projections),
      "mask + softmax + dropout": (
          lambda s: fused.masked_softmax_dropout(s, mask, key(), dropout), [scores]),
      "bias + dropout + residual + LayerNorm": (
          lambda a, r: fused.residual_norm(a, bias, key(), r, gamma, beta, dropout,
                                           1e-12), [x, residual]),
      "bias + GELU": (lambda a: fused.bias_gelu(a, tf.zeros([intermediate]), "float32"),
                      [inner]),
  }
  milliseconds = {}
  for name, (island, inputs) in islands.items():
    @tf.function(autograph=False)
    def step(*inputs, island=island):
      with tf.GradientTape() as tape:
        tape.watch(inputs)
        outputs = tf.nest.flatten(island(*inputs))
      gradients = tape.gradient(outputs, inputs)
      return [g[(0,) * g.shape.rank] for g in gradients]
    for _ in range(3):
      step(*inputs)
    seconds = []
    for _ in range(calls):
      start = time.perf_counter()
      [g.numpy() for g in step(*inputs)]
      seconds.append(time.perf_counter() - start)
    milliseconds[name] = round(1e3 * sorted(seconds)[len(seconds) // 2], 1)
  # A layer runs the residual + LayerNorm island twice.
  residual_ms = milliseconds["bias + dropout + residual + LayerNorm"]
  milliseconds["a layer's islands"] = round(sum(milliseconds.values()) + residual_ms, 1)
  return milliseconds


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--batch-size", type=int, default=32)
  parser.add_argument("--seq-length", type=int, default=128)
  parser.add_argument("--hidden-size", type=int, default=256)
  parser.add_argument("--heads", type=int, default=4)
  parser.add_argument("--intermediate-size", type=int, default=1024)
  parser.add_argument("--dropout", type=float, default=0.1)
  parser.add_argument("--threads", type=int, default=2)
  parser.add_argument("--calls", type=int, default=15)
  args = parser.parse_args(argv)
  cli.check_flags(parser, args, **{name: {"at_least": 1} for name in (
      "batch_size", "seq_length", "hidden_size", "heads", "intermediate_size", "threads",
      "calls")})
  if args.hidden_size % args.heads:
    parser.error(f"--hidden-size {args.hidden_size} is not a multiple of --heads "
                 f"{args.heads}")
  if not 0 <= args.dropout < 1:
    parser.error(f"--dropout {args.dropout}: expected a rate in [0, 1)")
  milliseconds = time_islands(args.batch_size, args.seq_length, args.hidden_size,
                              args.heads, args.intermediate_size, args.dropout,
                              args.threads, args.calls)
  print(f"| island, forward + backward, {args.threads} threads, dropout {args.dropout} "
        "| ms |\n|---|---|")
  for name, ms in milliseconds.items():
    print(f"| {name} | {ms} |")
  print(json.dumps(milliseconds))


if __name__ == "__main__":
  main()
