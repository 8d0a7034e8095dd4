"""Evaluates every kept checkpoint of a pre-training run: eval metrics against steps.

  python -m tools.eval_checkpoints --data-dir DATA --model-name NAME [--hparams JSON]

The run's own config (its pretrain_config.json, then --hparams) with num_eval_steps
--eval-batches; each checkpoint not yet in <model_dir>/eval_curve.jsonl is evaluated
(one TensorFlow start for all) and appended as a line, so re-running adds only new
checkpoints. Keep them with "keep_checkpoint_max" at least num_train_steps /
save_checkpoints_steps. The run's training_curves.png is redrawn with them as markers;
`python -m tools.compare_runs --eval` draws several runs' curves.
"""

import argparse
import json
import os
import sys

from util import startup  # pylint: disable=unused-import  # first: sets TensorFlow's environment

from runs.model_files import PRETRAINING_RECORD
from runs.record import read_run_record
from util import cli
from util.hparams import parse_hparams


def evaluate_checkpoints(data_dir: str, name: str, hparams: dict, eval_batches: int):
  """Every row of <model_dir>/eval_curve.jsonl, by step, after evaluating the kept
  checkpoints it lacks (Pretrainer.evaluate records each row)."""
  from model.weights.original import unreadable_checkpoint  # pylint: disable=import-outside-toplevel
  from pretrain import trainer  # pylint: disable=import-outside-toplevel
  from pretrain.config import load_config  # pylint: disable=import-outside-toplevel
  from runs.checkpoints import kept_checkpoints  # pylint: disable=import-outside-toplevel
  from training.curves import EVAL_CURVE_NAME, read_eval_curve  # pylint: disable=import-outside-toplevel
  config = load_config(name, data_dir, {**hparams, "num_eval_steps": eval_batches,
                                        "do_eval": True})
  log = os.path.join(config.model_dir, EVAL_CURVE_NAME)
  rows = read_eval_curve(log)
  note = lambda line: print(line, file=sys.stderr, flush=True)
  paths = [p for p in kept_checkpoints(config.model_dir, note)
           if int(p.rsplit("-", 1)[1]) not in rows]
  problems = {p: unreadable_checkpoint(p) for p in paths}
  cut, paths = [p for p in paths if problems[p]], [p for p in paths if not problems[p]]
  if not (rows or paths):
    raise ValueError(f"{problems[cut[0]]}; no checkpoint of {config.model_dir} reads whole"
                     if cut else f"{config.model_dir}: no checkpoint to evaluate")
  if cut:  # a copy cut short, a full disk
    note(f"note: skipping {cli.listed(os.path.basename(p) for p in cut)} of "
         f"{config.model_dir}, which cannot be read ({problems[cut[0]]})")
  if paths:
    evaluator = trainer.Pretrainer(config)
    for path in paths:
      evaluator.evaluate(checkpoint=path, write=False)
    rows = read_eval_curve(log)
  return [{"global_step": step, **rows[step]} for step in sorted(rows)]


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--data-dir", required=True)
  parser.add_argument("--model-name", required=True)
  parser.add_argument("--hparams", default="{}", help="JSON, as run_pretraining.py's")
  parser.add_argument("--eval-batches", type=int, default=20)
  args = parser.parse_args()
  cli.check_flags(parser, args, eval_batches={"at_least": 1})

  def evaluate() -> int:
    config_path = os.path.join(args.data_dir, "models", args.model_name,
                               PRETRAINING_RECORD)
    ran = read_run_record(config_path)["config"]
    # The record's model_dir is where the run trained: a copied run's names the original.
    hparams = {k: v for k, v in ran.items()
               if k not in ("model_name", "data_dir", "model_dir")}
    rows = evaluate_checkpoints(args.data_dir, args.model_name,
                                {**hparams, **parse_hparams(args.hparams)},
                                args.eval_batches)
    for row in rows:
      print(json.dumps(row), flush=True)
    return 0
  return cli.run_command(evaluate)


if __name__ == "__main__":
  sys.exit(main())
