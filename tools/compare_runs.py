"""Pre-training runs side by side: smoothed training curves against tokens seen.

  python -m tools.compare_runs --output attempts.png NAME=MODEL_DIR [NAME=MODEL_DIR ...]

Reads each model dir's train_log.jsonl, averages every scalar over windows of --window
steps (one logged batch is noisy) and draws one panel per scalar with one line per run,
against millions of training tokens (runs with other batch sizes stay comparable). Also
prints, per run, the windowed figures at a few points as a table. With --eval, the
held-out metrics of every kept checkpoint instead (tools.eval_checkpoints).
"""

import argparse
import json
import os
import sys

from util import startup  # pylint: disable=unused-import  # first: sets TensorFlow's environment

from runs.model_files import PRETRAINING_RECORD
from runs.record import read_run_record
from training.curves import EVAL_CURVE_NAME, LOG_NAME, plot_panels, read_log
from util import cli
from util.files import check_output

SCALARS = ("mlm_loss", "masked_lm_accuracy", "disc_loss", "disc_accuracy")
# --eval: the held-out metrics of every kept checkpoint (tools.eval_checkpoints).
EVAL_SCALARS = ("masked_lm_accuracy", "disc_auc", "disc_auc_fixed", "disc_state_cosine")


def windowed(log_path: str, window: int):
  """[(last step of the window, {scalar: mean})] over consecutive windows of steps."""
  entries = read_log(log_path)
  last = max(entries, default=0)
  rows, bucket = [], []
  for step, values in entries.items():
    bucket.append(values)
    if step % window == 0 or step == last:
      means = {k: sum(v[k] for v in bucket if k in v) / max(1, sum(k in v for v in bucket))
               for k in SCALARS if any(k in v for v in bucket)}
      rows.append((step, means))
      bucket = []
  return rows


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("runs", nargs="+", help="NAME=MODEL_DIR (its train_log.jsonl)")
  parser.add_argument("--window", type=int, default=200)
  parser.add_argument("--eval", action="store_true",
                      help="draw each run's eval_curve.jsonl (tools.eval_checkpoints) "
                      "instead of its windowed training log")
  parser.add_argument("--output", required=True, help="PNG path")
  args = parser.parse_args()
  cli.check_flags(parser, args, window={"at_least": 1})
  cli.check_given(parser, args, "output")
  for run in args.runs:
    if not run.partition("=")[2]:
      parser.error(f"{run!r}: expected NAME=MODEL_DIR")

  def draw() -> int:
    runs = dict(run.partition("=")[::2] for run in args.runs)
    check_output("--output", args.output, {f"run {name}": path for name, path in runs.items()})
    scalars = EVAL_SCALARS if args.eval else SCALARS
    panels = {k: {} for k in scalars}
    for name, model_dir in runs.items():
      config = read_run_record(os.path.join(model_dir, PRETRAINING_RECORD))["config"]
      tokens = config["train_batch_size"] * config["max_seq_length"]
      if args.eval:
        with open(os.path.join(model_dir, EVAL_CURVE_NAME), encoding="utf-8") as f:
          rows = [(r["global_step"], r) for r in map(json.loads, f)]
      else:
        rows = windowed(os.path.join(model_dir, LOG_NAME), args.window)
      for scalar in scalars:
        panels[scalar][name] = [(step * tokens / 1e6, m[scalar]) for step, m in rows
                                if scalar in m]
      print(f"{name}: " + "; ".join(
          f"{step} steps ({step * tokens / 1e6:.1f}M tok): " + ", ".join(
              f"{k} {m[k]:.3f}" for k in scalars if k in m)
          for step, m in rows[::max(1, len(rows) // 6)]))
    print(plot_panels(panels, "training tokens (millions)", args.output))
    return 0
  return cli.run_command(draw)


if __name__ == "__main__":
  sys.exit(main())
