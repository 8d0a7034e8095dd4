"""The optimizer's update alone: ours (AdamWeightDecay, as run_finetuning.py builds it:
layer-wise rates, weight decay, the global-norm clipping folded in) against the peer's
(torch's fused AdamW, transformers' Trainer default, after clip_grad_norm_ as the
Trainer clips), on electra_small's fine-tuning variables.

  python -m bench.bench_update [--calls 30] [--rounds 3] [--threads 1] [--model-size small]

Runs by hand, never in CI. Each side in its own process (bench/child.py), alternating
for --rounds rounds; a side's figure is the mean of --calls updates after 5 untimed
ones, the best round's. Gradients are fixed random values (every variable's, dense).
"""

import argparse
import json
import math
import os

from bench import child
from bench.bench_finetuning import TASK, hparams_of, random_batch
from bench.steps import CLOCKS, finetuning_step, time_steps
from util import cli


def ours_update(model_size: str):
  """(variables, a call that applies one update of fixed gradients and returns a
  scalar): the command's model and optimizer (bench.steps.finetuning_step's)."""
  import tempfile  # pylint: disable=import-outside-toplevel
  import numpy as np  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  features = random_batch(np)
  with tempfile.TemporaryDirectory() as folder:
    loop, _ = finetuning_step(TASK, features, 1, hparams_of(model_size), folder)
  variables = loop.train_step.model.trainable_variables
  grads = [tf.random.stateless_normal(v.shape, [i, 0]) * 1e-3
           for i, v in enumerate(variables)]

  @tf.function(autograph=False)
  def update():
    loop.train_step.optimizer.apply_gradients(zip(grads, variables))
    return variables[0][(0,) * variables[0].shape.rank]
  return variables, update


def time_update(side: str, model_size: str, calls: int, clock: str, shapes=None) -> dict:
  """A side's milliseconds per update; ours also gives its variables' shapes, the
  peer's parameters' (`shapes`)."""
  if side == "ours":
    variables, step = ours_update(model_size)
    shapes = [v.shape.as_list() for v in variables]
  else:
    import torch  # pylint: disable=import-outside-toplevel
    from bench import peers  # pylint: disable=import-outside-toplevel
    torch.set_num_threads(int(os.environ["TF_NUM_INTRAOP_THREADS"]))
    generator = torch.Generator().manual_seed(0)
    params = [torch.nn.Parameter(torch.zeros(shape)) for shape in shapes]
    for p in params:
      p.grad = torch.randn(p.shape, generator=generator) * 1e-3
    optimizer = peers.optimizer(params, 3e-4)
    clip = side == "torch_fused_clipped"

    def step():
      if clip:
        torch.nn.utils.clip_grad_norm_(params, 1.0)
      optimizer.step()
      return params[0].detach().reshape(-1)[0]
  seconds = time_steps(step, calls, 5, clock)
  return {"side": side, "ms": 1000 * seconds / calls, "shapes": shapes}


def main() -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--calls", type=int, default=30)
  parser.add_argument("--rounds", type=int, default=3)
  parser.add_argument("--threads", type=int, default=1)
  parser.add_argument("--model-size", default="small")
  parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall")
  args = parser.parse_args()
  cli.check_flags(parser, args, calls={"at_least": 1}, rounds={"at_least": 1},
                  threads={"at_least": 1})

  def compare() -> int:
    sides = ("ours", "torch_fused", "torch_fused_clipped")  # ours first: its shapes
    best, shapes = {}, None
    for round_ in range(args.rounds):
      for side in sides:
        result = child.measure(time_update, {
            "side": side, "model_size": args.model_size, "calls": args.calls,
            "clock": args.clock, "shapes": shapes}, args.threads)
        shapes = result["shapes"]
        best[side] = min(best.get(side, float("inf")), result["ms"])
        print(f"round {round_ + 1} {side:20s} {result['ms']:7.1f} ms", flush=True)
    weights = sum(math.prod(s) for s in shapes)
    print(f"\nthe update of electra_{args.model_size}'s {len(shapes)} variables "
          f"({weights:,} weights), {args.threads} thread(s), {args.clock} clock, best of "
          f"{args.rounds} rounds:")
    for side in sides:
      print(f"| {side} | {best[side]:.1f} ms | {best[side] / best['ours']:.2f}x ours' |")
    print(json.dumps(best))
    return 0
  return cli.run_command(compare)


if __name__ == "__main__":
  raise SystemExit(main())
