"""Batches of like lengths against the original's random batches, on a real encoder.

  python -m experiments.length_grouping --work-dir W --init-checkpoint DIR   # re-run to resume
  python -m experiments.length_grouping --work-dir W --table                 # print only

Fine-tunes the encoder DIR (an ELECTRA or BERT directory, e.g. all-MiniLM-L6-v2) on
each --tasks' training file cut to its first --train-examples records (the dev files,
chunking's test file, whole), --trials seeds each, once in the original's order and once
with length_grouping_batches --window; the two orders of a task alternate, so a drift in
the machine's load falls on both. Each (task, order) is one run_finetuning.py run of
--trials trials in this process (experiments.finetuning_runs: TensorFlow starts once);
one whose results exist is skipped. Run it with its standard output in
<work-dir>/log.txt: the training seconds of each trial are read from the runs' logs
there (each epoch's elapsed time; start-up, featurizing, the first step and evaluation
apart). Writes <work-dir>/results.json and results.md.
"""

import argparse
import json
import os
import re
import statistics
import sys
import time

from bench import SHARED_DATA
from experiments.compute_efficiency import GLUE_FOLDERS, mirror_task, read_json, write_json
from experiments.finetuning_runs import run_all

TASKS = {"sst2": ("glue/sst2", "accuracy"), "cola": ("glue/cola", "mcc"),
         "stsb": ("glue/stsb", "pearson"), "mrpc": ("glue/mrpc", "accuracy"),
         "chunk": ("chunk", "f1")}
ORDERS = ("original", "grouped")


def write_data(args):
  out = os.path.join(args.work_dir, "finetuning_data")
  for key in args.tasks:
    name = TASKS[key][0]
    if name == "chunk":
      mirror_task(os.path.join(args.shared_data, "conll2000"), os.path.join(out, "chunk"),
                  "train.txt", args.train_examples, header=False, blank_separated=True)
    else:  # CoLA's files have no header row, the others one
      mirror_task(os.path.join(args.shared_data, "glue", GLUE_FOLDERS[name]),
                  os.path.join(out, GLUE_FOLDERS[name]), "train.tsv", args.train_examples,
                  header=name != "glue/cola")


def run_name(task: str, order: str) -> str:
  return f"{task}_{order}"


def results_file(args, task: str, order: str) -> str:
  return os.path.join(args.work_dir, "results", run_name(task, order),
                      f"{TASKS[task][0].replace('/', '_')}_results.json")


def argv_of(args, task: str, order: str) -> list:
  hparams = {"num_trials": args.trials, "num_train_epochs": args.epochs,
             "learning_rate": args.learning_rate, "max_seq_length": args.max_seq_length,
             "length_grouping_batches": args.window if order == "grouped" else 0,
             "log_every_steps": 10, "keep_all_models": False, "export_serving": False,
             "write_curves": False, "vocab_file": os.path.join(args.init_checkpoint,
                                                               "vocab.txt"),
             "model_dir": os.path.join(args.work_dir, "models", run_name(task, order)),
             "results_dir": os.path.dirname(results_file(args, task, order))}
  return ["--task", TASKS[task][0], "--data-dir", args.work_dir, "--model-name",
          run_name(task, order), "--init-checkpoint", args.init_checkpoint,
          "--hparams", json.dumps(hparams)]


def training_seconds(log_path: str) -> dict:
  """Each run's (by its model name) trials' training seconds, from the run's log in
  `log_path` (this study's standard output): the sum over a trial's epochs of the
  elapsed time its last step's line shows (from its first step's end: tracing and the
  first step apart), to the second."""
  seconds, name = {}, None
  with open(log_path, encoding="utf-8") as f:
    for line in f:
      run = re.match(r"run \d+/\d+: run_finetuning\.py .*--model-name (\S+)", line)
      if run:
        name = run.group(1)
        seconds[name] = {}
      end = re.match(r"trial (\d+) step (\d+)/\2 .*elapsed (?:(\d+)h)?(\d+)m(\d+)s", line)
      if end and name:
        hours, minutes, secs = (int(g or 0) for g in end.group(3, 4, 5))
        trial = int(end.group(1))
        seconds[name][trial] = seconds[name].get(trial, 0) + 3600 * hours + 60 * minutes + secs
  return {name: [trials[t] for t in sorted(trials)] for name, trials in seconds.items()}


def run_study(args) -> int:
  timings_path = os.path.join(args.work_dir, "timings.json")
  timings = read_json(timings_path, {})
  for task in args.tasks:
    for order in ORDERS:
      name = run_name(task, order)
      if os.path.exists(results_file(args, task, order)) and name in timings:
        continue
      start = time.time()
      code = run_all([{"argv": argv_of(args, task, order),
                       "results": results_file(args, task, order)}])
      if code:
        return code
      timings[name] = {"whole_s": round(time.time() - start, 1)}
      write_json(timings_path, timings)
  return 0


def table(args) -> str:
  timings = read_json(os.path.join(args.work_dir, "timings.json"), {})
  trained = training_seconds(os.path.join(args.work_dir, "log.txt"))
  rows, report = [], {}
  for task in args.tasks:
    metric = TASKS[task][1]
    cells = {}
    for order in ORDERS:
      results = read_json(results_file(args, task, order))
      if results is None or run_name(task, order) not in timings:
        continue
      key = next(k for k in results["summary"] if k.endswith(" " + metric))
      scores = results["summary"][key]["trials"]
      cells[order] = {"scores": scores, "median": statistics.median(scores),
                      "training_s": trained[run_name(task, order)]}
    if len(cells) < 2:
      continue
    base, grouped = cells["original"], cells["grouped"]
    where = ("below" if grouped["median"] < min(base["scores"]) else
             "above" if grouped["median"] > max(base["scores"]) else "within")
    speed = statistics.median(base["training_s"]) / statistics.median(grouped["training_s"])
    report[task] = {**cells, "grouped_median_against_spread": where,
                    "training_speedup": speed}
    fmt = lambda c: (f"{c['median']:.2f} ({min(c['scores']):.2f}-{max(c['scores']):.2f})"
                     f" | {statistics.median(c['training_s']):.0f}")
    rows.append(f"| {task} ({metric}) | {fmt(base)} | {fmt(grouped)} | {speed:.2f}x | "
                f"{where} |")
  write_json(os.path.join(args.work_dir, "results.json"), report)
  text = "\n".join([
      "| task | original order: median (min-max) | s | grouped | s | training speed-up |"
      " grouped median against the original's seeds |",
      "|---|---|---|---|---|---|---|", *rows])
  with open(os.path.join(args.work_dir, "results.md"), "w", encoding="utf-8") as f:
    f.write(text + "\n")
  return text


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--work-dir", required=True)
  parser.add_argument("--init-checkpoint", help="the encoder (required unless --table)")
  parser.add_argument("--shared-data", default=SHARED_DATA)
  parser.add_argument("--tasks", default=",".join(TASKS),
                      type=lambda s: [t for t in s.split(",") if t])
  parser.add_argument("--train-examples", type=int, default=1000)
  parser.add_argument("--epochs", type=float, default=2.0)
  parser.add_argument("--trials", type=int, default=3)
  parser.add_argument("--window", type=int, default=50,
                      help="length_grouping_batches of the grouped runs")
  parser.add_argument("--learning-rate", type=float, default=1e-4)
  parser.add_argument("--max-seq-length", type=int, default=128)
  parser.add_argument("--table", action="store_true", help="print the table, run nothing")
  args = parser.parse_args(argv)
  unknown = set(args.tasks) - set(TASKS)
  if unknown:
    parser.error(f"--tasks: unknown {sorted(unknown)}; expected some of {sorted(TASKS)}")
  if not args.table:
    if not args.init_checkpoint:
      parser.error("--init-checkpoint is required to run")
    write_data(args)
    code = run_study(args)
    if code:
      return code
  print(table(args))
  return 0


if __name__ == "__main__":
  sys.exit(main())
