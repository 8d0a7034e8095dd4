"""Peak memory and seconds per step of the training step, default against `recompute`.

  python -m bench.bench_memory                  # pre-training, electra_small 128 x 128
  python -m bench.bench_memory --task squad --batch-size 16   # SQuAD fine-tuning, seq 512
  python -m bench.bench_memory --variants default,autodiff_gelu,recompute

Runs by hand, never in CI. Each variant runs in its own process, one after the other
(bench/child.py: peak RSS, from getrusage, is per process): bench_pretraining's or
bench_qa_memory's real training step on random ids, float32. Variants: "default";
"recompute" (gradient checkpointing of every transformer layer, the `recompute: true`
setting); "autodiff_gelu" (pre-training only: the GELU differentiated op by op, as before
model/encoder.py's gelu had its own gradient). Prints each variant's JSON line, then one
JSON line with all the figures and the ratios to "default".
"""

import argparse
import json
import os
import sys

from bench import bench_pretraining, bench_qa_memory, child, choice_list
from util import cli

VARIANTS = {"default": {}, "recompute": {"recompute": True},
            "autodiff_gelu": {"autodiff_gelu": True}}


def measure(task: str, variant: str, batch: int, steps: int) -> dict:
  if task == "pretraining":
    function = bench_pretraining.run_ours
    kwargs = {"batch_size": batch, "steps": steps, **VARIANTS[variant]}
  else:
    function = bench_qa_memory.run_setting
    kwargs = {"batch": batch, "accumulation": 1, "steps": steps, **VARIANTS[variant]}
  try:
    figures = child.measure(function, kwargs)
  except child.ChildFailed as e:
    return {"error": str(e)}
  seconds = figures.get("seconds_per_step") or 1 / figures["steps_per_s"]
  return {"peak_rss_mib": figures["peak_rss_mib"], "seconds_per_step": round(seconds, 2)}


def parse_args(argv=None) -> argparse.Namespace:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--task", default="pretraining", choices=("pretraining", "squad"))
  parser.add_argument("--batch-size", type=int, default=128)
  parser.add_argument("--steps", type=int, default=3)
  parser.add_argument("--variants", type=choice_list(VARIANTS),
                      default=["default", "recompute"],
                      help="comma-separated, of " + ", ".join(VARIANTS))
  args = parser.parse_args(argv)
  cli.check_flags(parser, args, batch_size={"at_least": 1}, steps={"at_least": 1})
  if args.task == "squad" and "autodiff_gelu" in args.variants:
    parser.error("--variants autodiff_gelu is measured for --task pretraining only")
  return args


def main(argv=None) -> int:
  args = parse_args(argv)
  return cli.run_command(lambda: compare(args))


def compare(args: argparse.Namespace) -> int:
  """Each variant in its own process, then the figures and ratios to "default"."""
  results = {}
  for variant in args.variants:
    results[variant] = measure(args.task, variant, args.batch_size, args.steps)
    print(json.dumps({"variant": variant, **results[variant]}), flush=True)
  base = results.get("default", {})
  ratios = {f"{v}_vs_default": {
      "memory": round(r["peak_rss_mib"] / base["peak_rss_mib"], 3),
      "time": round(r["seconds_per_step"] / base["seconds_per_step"], 3)}
            for v, r in results.items()
            if v != "default" and "error" not in r and "peak_rss_mib" in base}
  print(json.dumps({"task": args.task, "model": "electra_small",
                    "batch": args.batch_size, "seq": 128 if args.task == "pretraining"
                    else 512, "precision": "float32", "steps": args.steps,
                    "threads": os.environ.get("TF_NUM_INTRAOP_THREADS", "default"),
                    "variants": results, **ratios}))
  return 0


if __name__ == "__main__":
  sys.exit(main())
