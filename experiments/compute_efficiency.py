"""ELECTRA vs BERT-style masked LM at equal pre-training compute (paper Figure 1, Table 1).

  python -m experiments.compute_efficiency           # the whole study; re-run to resume
  python -m experiments.compute_efficiency --table   # re-print the results, run nothing
  python -m experiments.compute_efficiency --encoders random,minilm=DIR   # judge given encoders

An experiment run by hand (tests/test_compute_efficiency.py runs a tiny version). In
<work-dir>:
1. data: records and a --vocab-size vocabulary learned from <shared-data>/corpus
   (build_pretraining_dataset.py); finetuning_data/ with the GLUE folders, chunk/
   (CoNLL-2000) and squadv1/ (the SQuAD 1.1 dev file split by article, as
   experiments.exp_transfer does), training files cut to SCHEDULES' sizes.
2. pre-training (run_pretraining.py), the recipe's preset (configs/pretraining/<size>)
   for both arms: "electra" for --budget-steps steps, and "mlm" (electra_objective false:
   one full-size encoder, as BERT) for as many steps as make the same training FLOPs
   (the objective's flops(), pretrain/objectives/). Checkpoints of each run at
   --fractions of its FLOPs (in eighths; default 1/8, 1/4, 1/2 and all of it) are
   exported for fine-tuning (the schedule is the full run's, as in the paper).
3. fine-tuning (run_finetuning.py) of those encoders (eight by default) and a random one (or of the
   --encoders given instead: no pre-training) with one recipe (configs/finetuning/<size>)
   by a judge, the same for every encoder:
   - original (the default): the original's recipe (whole training sets, SST-2 cut to
     --sst2-cap; its epochs per task, from configs/finetuning/task_defaults.json and the
     config's defaults: 3, 10 for STS-B and RTE; MRPC and STS-B in both orders) at
     SCHEDULES' lengths, every --lr-grid rate, --trials seeds on every task; per encoder
     and task the rate of the best dev median is chosen, and the grid is reported.
     Its data, runs and results live in <work-dir>/judge_original/.
   - short: SCHEDULES (one epoch of a few thousand examples, the recipe's rate, one seed
     on chunking and SQuAD), which measures mostly how fast an encoder leaves the label
     prior; in <work-dir> itself, as the study was first run.
4. results.md / results.json (one column per encoder) and scores_vs_flops.png, in the
   judge's folder.
Units run as processes, --jobs at a time: each pre-training arm, and per arm and task
the fine-tuning of the arm's encoders at every rate (one process: TensorFlow starts once
for all its runs). A unit, and each run in it, is skipped once its results exist, and
Ctrl-C lets running ones save, so re-running the command resumes; timings.json keeps
each unit's wall time. On this 2-core CPU, --jobs 2: pre-training ~1.4 s per
--budget-steps step (2600 steps ~60 min), fine-tuning by the short judge ~60 min; the
original judge prints its planned steps per encoder before it starts.
"""

import argparse
import fractions
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time

from bench import ROOT, SHARED_DATA
from experiments.exp_transfer import split_squad
from util.files import atomic_write

FRACTIONS = "1/8,1/4,1/2,1"  # --fractions' default
ARMS = ("electra", "mlm")
GLUE_FOLDERS = {"glue/cola": "CoLA", "glue/sst2": "SST-2", "glue/mrpc": "MRPC",
                "glue/stsb": "STS-B", "glue/rte": "RTE"}
# The GLUE average, as the paper's: each task's main metric.
GLUE_MAIN = {"glue/cola": "mcc", "glue/sst2": "accuracy", "glue/mrpc": "accuracy",
             "glue/stsb": "spearman", "glue/rte": "accuracy"}
# Shortened to fit a 2-core CPU, identical for every encoder: one epoch over the first
# "max_train_examples" (--max-train-examples overrides them; SQuAD counts questions,
# MRPC and STS-B train on both orders); the rest are hyperparameters. SST-2, CoLA and
# STS-B lose few tokens at length 64. CPU time per encoder, measured (tiny model, one
# thread, nice'd beside other work): SST-2 130 s, CoLA 131 s, STS-B 135 s, MRPC 133 s
# (3 trials each, one process: ~17 s start-up, ~36 s per trial), RTE ~135 s, chunking
# ~70 s, SQuAD ~265 s (half of it scoring 2,337 dev features twice): ~1,000 s, so the
# 7 encoders take ~60 min of the 2 cores.
SCHEDULES = {
    "glue/sst2": {"max_seq_length": 64, "num_train_epochs": 1.0, "max_train_examples": 4000},
    "glue/cola": {"max_seq_length": 64, "num_train_epochs": 1.0, "max_train_examples": 4000},
    "glue/stsb": {"max_seq_length": 64, "num_train_epochs": 1.0, "max_train_examples": 2000},
    "glue/mrpc": {"max_seq_length": 128, "num_train_epochs": 1.0, "max_train_examples": 1000},
    "glue/rte": {"max_seq_length": 128, "num_train_epochs": 1.0, "max_train_examples": 2000},
    "squad/v1.1": {"max_seq_length": 256, "doc_stride": 128, "num_train_epochs": 1.0,
                   "max_train_examples": 1500},
    "chunk": {"max_seq_length": 128, "num_train_epochs": 1.0, "max_train_examples": 2000},
}
NO_TRIALS = ("squad/v1.1", "chunk")  # one seed each: long runs, small spread
JUDGES = ("original", "short")
# The original judge's tasks: the six. SQuAD (a split of the dev file) stays the
# short judge's: at the original's 2 epochs on its ~8,000 questions it alone would cost
# more than the other tasks together.
JUDGED_TASKS = tuple(t for t in SCHEDULES if t != "squad/v1.1")
# The metric a rate is chosen by.
MAIN_METRIC = {**GLUE_MAIN, "chunk": "f1"}
# The settings each judge's results depend on (beyond the pre-training's).
JUDGE_SETTINGS = {"original": ("trials", "caps", "finetune_hparams", "lr_grid"),
                  "short": ("trials", "caps", "finetune_hparams")}


def fail(message: str):
  print(f"error: {message}", file=sys.stderr)
  sys.exit(2)


def json_object(text: str) -> dict:
  try:
    value = json.loads(text)
  except json.JSONDecodeError as e:
    raise argparse.ArgumentTypeError(f"invalid JSON: {e}") from None
  if not isinstance(value, dict):
    raise argparse.ArgumentTypeError("expected a JSON object")
  return value


def read_json(path: str, default=None):
  if not os.path.exists(path):
    return default
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def write_json(path: str, value):
  with atomic_write(path) as f:
    json.dump(value, f, indent=2)  # in insertion order: the table's columns


# ---- data ----------------------------------------------------------------------------

def first_records(data: bytes, count: int, header: bool, blank_separated: bool) -> bytes:
  """The header (if any) and the first `count` records: lines, or blank-line-ended
  blocks. Bytes stay as they are (MRPC's BOM, line ends)."""
  lines = data.splitlines(keepends=True)
  out, seen = lines[:int(header)], 0
  for line in lines[int(header):]:
    if seen == count:
      break
    out.append(line)
    seen += not blank_separated or not line.strip()
  return b"".join(out)


def mirror_task(src: str, dst: str, train_file: str, count: int, header: bool,
                blank_separated: bool = False):
  """dst/ links to src/'s files, except a train file cut to `count` records (0: all)."""
  shutil.rmtree(dst, ignore_errors=True)
  os.makedirs(dst)
  for name in os.listdir(src):
    if name == train_file and count:
      with open(os.path.join(src, name), "rb") as f:
        data = first_records(f.read(), count, header, blank_separated)
      with open(os.path.join(dst, name), "wb") as f:
        f.write(data)
    else:
      os.symlink(os.path.abspath(os.path.join(src, name)), os.path.join(dst, name))


def write_finetuning_data(args):
  out = os.path.join(args.home, "finetuning_data")
  cap = lambda task: args.caps.get(task, 0)
  for task, folder in GLUE_FOLDERS.items():
    # CoLA's files have no header row (as GLUE distributes them); the others do.
    mirror_task(os.path.join(args.shared_data, "glue", folder), os.path.join(out, folder),
                "train.tsv", cap(task), header=task != "glue/cola")
  mirror_task(os.path.join(args.shared_data, "conll2000"), os.path.join(out, "chunk"),
              "train.txt", cap("chunk"), header=False, blank_separated=True)
  split_squad(os.path.join(args.shared_data, "squad", "dev-v1.1.json"), args.home,
              args.squad_train_articles, cap("squad/v1.1"))


def judge_home(work_dir: str, judge: str) -> str:
  """Where a judge's fine-tuning data, runs and results live: apart, so that the two
  judges' results never mix (the short judge's where the study first kept them)."""
  return work_dir if judge == "short" else os.path.join(work_dir, f"judge_{judge}")


def data_marker(home: str) -> str:
  return os.path.join(home, "finetuning_data", "done.json")


def prepare_data(args, timings):
  """Records and vocabulary (once per work dir) and the judge's fine-tuning data, unless
  a previous run made them."""
  records = os.path.join(args.work_dir, "pretrain_tfrecords")
  unit = f"data {args.judge}"
  # A judge's marker is written only once the records and vocabulary are whole.
  built = os.path.isdir(records) and os.listdir(records) and any(
      os.path.exists(data_marker(judge_home(args.work_dir, j))) for j in JUDGES)
  if built and read_json(data_marker(args.home)) == args.caps:
    return timings.record(unit, "data", 0.0, "skipped")
  t0 = time.time()
  if not built:
    print("data: records and vocabulary", flush=True)
    if os.path.isdir(records):
      shutil.rmtree(records)  # a partial build
    log = os.path.join(args.work_dir, "logs", "data.log")
    os.makedirs(os.path.dirname(log), exist_ok=True)
    with open(log, "w", encoding="utf-8") as f:
      if subprocess.run(
          [sys.executable, os.path.join(ROOT, "build_pretraining_dataset.py"),
           "--corpus-dir", os.path.join(args.shared_data, "corpus"),
           "--data-dir", args.work_dir, "--vocab-size", str(args.vocab_size),
           "--num-processes", str(args.jobs), "--no-progress"],
          stdout=f, stderr=subprocess.STDOUT).returncode:
        fail(f"build_pretraining_dataset.py failed; see {log}")
  print(f"data: the {args.judge} judge's fine-tuning data", flush=True)
  write_finetuning_data(args)
  write_json(data_marker(args.home), args.caps)
  timings.record(unit, "data", time.time() - t0, "ran")


# ---- the plan ------------------------------------------------------------------------

def make_plan(args) -> dict:
  """Each arm's steps, FLOPs and checkpoints, and the encoders to fine-tune."""
  from data_prep.vocab import load_vocab  # pylint: disable=g-import-not-at-top
  from pretrain import config as pretrain_config  # pylint: disable=g-import-not-at-top
  from pretrain.objectives import objective_for  # pylint: disable=g-import-not-at-top
  # A learned vocabulary may fall short of --vocab-size.
  vocab_size = len(load_vocab(os.path.join(args.work_dir, "vocab.txt")))
  random = {"arm": "random", "step": 0, "train_flops": 0.0, "init_checkpoint": ""}
  if args.encoders:
    return {"vocab_size": vocab_size, "arms": {}, "encoders": {
        name: given_encoder(path) if path else random
        for name, path in args.encoders.items()}}
  base = {**args.pretrain_hparams, "model_size": args.model_size, "vocab_size": vocab_size}
  budget = None  # the electra arm's training FLOPs
  arms, encoders = {}, {}
  for arm in ARMS:
    name = f"{arm}_{args.model_size}"
    hparams = {**base, **({"electra_objective": False, **args.mlm_hparams}
                          if arm == "mlm" else {})}
    config = pretrain_config.load_config(name, args.work_dir, hparams)
    per_step = objective_for(config).flops().train_flops_per_step
    if budget is None:
      budget = (args.budget_steps or config.num_train_steps) * per_step
    steps = max(8, round(budget / per_step))  # an eighth of it is at least a step
    # Checkpoints every `interval` steps, a divisor of an eighth of the run (so 1/8, 1/4
    # and 1/2 are saved) near the preset's interval (so a hard kill loses little), all
    # kept.
    eighth = round(steps / 8)
    interval = next(d for d in range(min(config.save_checkpoints_steps, eighth),
                                     eighth + 1) if eighth % d == 0)
    hparams.update(num_train_steps=steps, save_checkpoints_steps=interval,
                   keep_checkpoint_max=steps // interval + 10)  # + room for interruptions
    export = os.path.join(args.work_dir, "models", name, "export")
    # The end of the run is run_pretraining.py's own export; others go to step_N.
    at = {f: steps if f == "1" else int(fractions.Fraction(f) * 8) * eighth
          for f in args.fractions}
    export_steps = sorted(step for step in at.values() if step != steps)
    for fraction, step in at.items():
      encoders[f"{arm}@{fraction}"] = {
          "arm": arm, "step": step, "train_flops": step * per_step,
          "init_checkpoint": export if step == steps else os.path.join(
              export, f"step_{step}")}
    arms[arm] = {"model_name": name, "num_train_steps": steps,
                 "train_flops_per_step": per_step, "train_flops_total": steps * per_step,
                 "hparams": hparams, "export_steps": export_steps}
  encoders["random"] = random
  return {"vocab_size": vocab_size, "arms": arms, "encoders": encoders}


def given_encoder(path: str) -> dict:
  """An --encoders entry: any checkpoint run_finetuning.py reads (ours, the original's,
  a Hugging Face ELECTRA or BERT directory), with its own vocabulary."""
  from model.weights import CheckpointError  # pylint: disable=g-import-not-at-top
  from runs.pretrained import open_weights  # pylint: disable=g-import-not-at-top
  try:
    weights = open_weights(path)
    weights.model_config("discriminator")  # refused here, not in every unit's log
    vocab = weights.vocab()
  except CheckpointError as e:
    fail(f"--encoders: {e}")
  return {"arm": "given", "step": 0, "train_flops": None,
          "init_checkpoint": os.path.abspath(path), "vocab_file": os.path.abspath(vocab)}


# ---- units and their scheduling -------------------------------------------------------

class Timings:
  """<work-dir>/timings.json: each unit's part, total wall time over its attempts, and
  what this invocation did with it (ran, skipped, failed)."""

  def __init__(self, path: str):
    self.path = path
    self.units = read_json(path, {})

  def record(self, unit: str, part: str, seconds: float, status: str):
    entry = self.units.setdefault(unit, {"part": part, "seconds": 0.0})
    entry["seconds"] = round(entry["seconds"] + seconds, 1)
    entry["status"] = status
    write_json(self.path, self.units)

  def summary(self) -> str:
    """Minutes per part (data, each pre-training arm, fine-tuning per arm)."""
    parts = {}
    for entry in self.units.values():
      part = parts.setdefault(entry["part"], {"seconds": 0.0})
      part["seconds"] += entry["seconds"]
      part[entry["status"]] = part.get(entry["status"], 0) + 1
    return "\n".join(f"  {name:<18} {part.pop('seconds') / 60:6.1f} min (units: " +
                     ", ".join(f"{n} {status}" for status, n in part.items()) + ")"
                     for name, part in parts.items())


def units_of(args, plan) -> list:
  """(name, part, command, result files, names it waits for), in start order."""
  python = sys.executable
  units = []
  for arm, spec in plan["arms"].items():
    command = [python, os.path.join(ROOT, "run_pretraining.py"), "--model-name",
               spec["model_name"], "--data-dir", args.work_dir, "--hparams",
               json.dumps(spec["hparams"]), "--export-steps",
               ",".join(map(str, spec["export_steps"]))]
    outputs = [e["init_checkpoint"] for e in plan["encoders"].values() if e["arm"] == arm]
    units.append((f"pretrain {arm}", f"pretrain {arm}", command,
                  [os.path.join(o, "checkpoint") for o in outputs], []))
  # Fine-tuning: a unit per arm and task, which runs the arm's encoders (its latest
  # checkpoint first) at every rate of the judge in one process
  # (experiments.finetuning_runs): a run is short, and a process of its own would load
  # TensorFlow for each. Units that need no pre-training first: they fill idle cores.
  # Then task by task, both arms side by side, so that a study cut short still compares
  # the arms at equal compute.
  def latest_first(encoder):
    spec = plan["encoders"][encoder]
    arm = plan["arms"].get(spec["arm"])
    return (arm is not None, -spec["step"] / arm["num_train_steps"] if arm else 0)
  encoders = sorted(plan["encoders"], key=latest_first)
  arms = dict.fromkeys(plan["encoders"][e]["arm"] for e in encoders)
  judge = "finetune" if args.lr_grid is None else "judge"
  for arm, task in sorted(((a, t) for t in args.tasks for a in arms),
                          key=lambda unit: unit[0] in plan["arms"]):
    runs = []
    for encoder in (e for e in encoders if plan["encoders"][e]["arm"] == arm):
      spec = plan["encoders"][encoder]
      for lr in args.lr_grid or [None]:
        hparams = {"model_size": args.model_size, "vocab_size": plan["vocab_size"],
                   "vocab_file": spec.get("vocab_file",
                                          os.path.join(args.work_dir, "vocab.txt")),
                   **task_hparams(args, task, lr),
                   "results_dir": results_dir(args.home, encoder, lr)}
        argv = ["--task", task, "--model-name", encoder_dir(encoder, lr), "--data-dir",
                args.home, "--hparams", json.dumps(hparams)]
        if spec["init_checkpoint"]:
          argv += ["--init-checkpoint", spec["init_checkpoint"]]
        runs.append({"argv": argv, "results": results_file(args.home, encoder, task, lr)})
    units.append((f"{judge} {arm} {task}", f"{judge} {arm}",
                  [python, "-m", "experiments.finetuning_runs", json.dumps(runs)],
                  [run["results"] for run in runs],
                  [f"pretrain {arm}"] if arm in plan["arms"] else []))
  return units


def task_hparams(args, task: str, lr=None) -> dict:
  """What a judge sets for one task's runs, over the recipe's preset: the original
  judge leaves the epochs to configs/finetuning/task_defaults.json and the config's
  defaults (the original's), and sets the rate."""
  if args.judge == "short":
    schedule = {k: v for k, v in SCHEDULES[task].items() if k != "max_train_examples"}
    trials = 1 if task in NO_TRIALS else args.trials
  else:
    # Only the last trial's model is kept: a unit's runs are scored, then useless.
    schedule = {"max_seq_length": SCHEDULES[task]["max_seq_length"],
                "learning_rate": lr, "keep_all_models": False}
    trials = args.trials
  return {"num_trials": trials, **schedule,
          # The study wants scores: no servable models, no curves' PNGs.
          "export_serving": False, "write_curves": False,
          **args.finetune_hparams}


def run_config(args, task: str):
  """The FinetuningConfig run_finetuning.py resolves for the judge's runs of `task`."""
  from finetune import config as finetune_config  # pylint: disable=g-import-not-at-top
  return finetune_config.load_config(args.model_size, [task], args.home, {
      "model_size": args.model_size, **task_hparams(args, task, (args.lr_grid or [None])[0])})


def planned_steps(args) -> dict:
  """Each task's training steps per run (one seed at one rate), from the judge's data."""
  from finetune import tasks as task_registry  # pylint: disable=g-import-not-at-top
  from finetune.trainer import num_train_steps  # pylint: disable=g-import-not-at-top
  steps = {}
  for name in args.tasks:
    config, task = run_config(args, name), task_registry.get_task(name)
    examples = task_registry.read_examples(task, args.home, task.train_split)
    # Sentence and tagging tasks make one feature per (prepared) example.
    runner = task_registry.runner_for(task, config, tokenizer=None)
    steps[name] = num_train_steps(
        len(runner.prepare_examples(examples, task.train_split)), config)
  return steps


def choose_lr(trials: dict) -> float:
  """The rate whose seeds' dev scores have the best median (the first of a tie)."""
  medians = {lr: statistics.median(scores) for lr, scores in trials.items()}
  return max(medians, key=medians.get)


def encoder_dir(encoder: str, lr=None) -> str:
  return "finetune_" + encoder.replace("@", "_").replace("/", "of") + (
      "" if lr is None else f"_lr{lr:g}")


def results_dir(home: str, encoder: str, lr=None) -> str:
  return os.path.join(home, "results", encoder_dir(encoder),
                      *([] if lr is None else [f"lr_{lr:g}"]))


def results_file(home: str, encoder: str, task: str, lr=None) -> str:
  # run_finetuning.py's name for a single task's results (FinetuningConfig.results_file).
  return os.path.join(results_dir(home, encoder, lr),
                      f"{task.replace('/', '_')}_results.json")


def run_units(units, jobs: int, work_dir: str, timings: Timings) -> list:
  """Runs the units' commands, `jobs` at a time, each once the units it waits for are
  done; a unit whose results exist is skipped. Returns the names of failed units.
  Ctrl-C (or SIGTERM) passes SIGINT on, so runs save before they stop."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  # `python -m experiments.finetuning_runs` from any folder.
  env["PYTHONPATH"] = os.pathsep.join([ROOT] + [p for p in env.get("PYTHONPATH", "")
                                                .split(os.pathsep) if p])
  # Several single-threaded jobs use a few cores better than one job using them all.
  threads = str(max(1, (os.cpu_count() or 1) // jobs))
  env.update(TF_NUM_INTRAOP_THREADS=threads, TF_NUM_INTEROP_THREADS=threads)
  os.makedirs(os.path.join(work_dir, "logs"), exist_ok=True)
  status, running = {}, {}  # name -> (process, part, start time, log path)

  def finish(name):
    process, part, t0, log = running.pop(name)
    code = process.wait()
    status[name] = ("ran" if not code else
                    "interrupted" if code in (130, -signal.SIGINT) else "failed")
    timings.record(name, part, time.time() - t0, status[name])
    print(f"{status[name]} {name} in {(time.time() - t0) / 60:.1f} min" +
          (f" (log: {log})" if code else ""), flush=True)

  pending = list(units)
  try:
    while pending or running:
      for name in [n for n, r in running.items() if r[0].poll() is not None]:
        finish(name)
      for unit in list(pending):
        name, part, command, results, after = unit
        if all(os.path.exists(r) for r in results):
          status[name] = "skipped"
          timings.record(name, part, 0.0, "skipped")
        elif any(status.get(a, "ran") not in ("ran", "skipped") for a in after):
          status[name] = "failed"
          print(f"not run: {name} ({', '.join(after)} did not finish)", flush=True)
        elif len(running) < jobs and all(status.get(a) in ("ran", "skipped")
                                         for a in after):
          print(f"start {name}", flush=True)
          log = os.path.join(work_dir, "logs",
                             name.replace(" ", "_").replace("/", "-") + ".log")
          with open(log, "a", encoding="utf-8") as f:  # the child keeps its own handle
            process = subprocess.Popen(command, stdout=f, stderr=subprocess.STDOUT,
                                       env=env)
          running[name] = (process, part, time.time(), log)
        else:
          continue
        pending.remove(unit)
      time.sleep(0.2)
  except KeyboardInterrupt:
    for process, *_ in running.values():
      process.send_signal(signal.SIGINT)
    for name in list(running):
      finish(name)
    raise
  return sorted(n for n, s in status.items() if s == "failed")


# ---- results ---------------------------------------------------------------------------

def summaries(report: dict) -> dict:
  """A results file's metrics: keys "<task> <split> <metric>" -> {"median", "trials"}."""
  return {k.split(" ")[-1]: v for k, v in report["summary"].items()}


def collect(args, plan) -> dict:
  """Each encoder's FLOPs, per-task summaries (median and trials; the original judge's
  at the chosen rate, with every rate's median in "lr") and GLUE average."""
  encoders = {}
  for encoder, spec in plan["encoders"].items():
    tasks, rates = {}, {}
    for task in args.tasks:
      if not args.lr_grid:
        report = read_json(results_file(args.home, encoder, task))
        if report:
          tasks[task] = summaries(report)
        continue
      reports = {lr: read_json(results_file(args.home, encoder, task, lr))
                 for lr in args.lr_grid}
      if all(reports.values()):
        grid = {lr: summaries(r) for lr, r in reports.items()}
        main = MAIN_METRIC[task]
        lr = choose_lr({lr: g[main]["trials"] for lr, g in grid.items()})
        tasks[task] = grid[lr]
        rates[task] = {"chosen": lr, main: {f"{r:g}": g[main]["median"]
                                            for r, g in grid.items()}}
    glue = [t for t in GLUE_MAIN if t in args.tasks]
    glue_avg = statistics.mean(tasks[t][GLUE_MAIN[t]]["median"] for t in glue) if glue and \
        all(t in tasks for t in glue) else None
    # Every judged task's main metric (chunking's F1 too): what the two objectives are
    # compared by.
    task_avg = statistics.mean(tasks[t][MAIN_METRIC[t]]["median"] for t in args.tasks) \
        if all(t in tasks for t in args.tasks) else None
    encoders[encoder] = {**spec, "tasks": tasks, "glue_avg": glue_avg, "task_avg": task_avg,
                         **({"lr": rates} if args.lr_grid else {})}
  return {"arms": {a: {k: v for k, v in s.items() if k != "hparams"}
                   for a, s in plan["arms"].items()},
          "encoders": encoders}


def table(args, results: dict) -> str:
  encoders = results["encoders"]
  header = [f"{e} ({s['train_flops']:.2g} FLOPs)" if s["train_flops"] else e
            for e, s in encoders.items()]
  rows = ["| task | metric | " + " | ".join(header) + " |",
          "|---|---|" + "---|" * len(encoders)]
  for task in args.tasks:
    metrics = sorted({m for s in encoders.values() for m in s["tasks"].get(task, {})})
    for metric in metrics:
      cells = []
      for s in encoders.values():
        value = s["tasks"].get(task, {}).get(metric)
        if value is None:
          cells.append("-")
        elif len(value["trials"]) > 1:
          cells.append(f"{value['median']:.1f} ({min(value['trials']):.1f}-"
                       f"{max(value['trials']):.1f})")
        else:
          cells.append(f"{value['median']:.1f}")
      rows.append(f"| {task} | {metric} | " + " | ".join(cells) + " |")
    if args.lr_grid:  # the original judge: the rate chosen, and what each rate gave
      rates = [s["lr"].get(task) for s in encoders.values()]
      rows.append(f"| {task} | rate (best dev median) | " + " | ".join(
          "-" if r is None else f"{r['chosen']:g}" for r in rates) + " |")
      main = MAIN_METRIC[task]
      rows.append(f"| {task} | {main} median by rate | " + " | ".join(
          "-" if r is None else ", ".join(f"{lr}: {m:.1f}" for lr, m in r[main].items())
          for r in rates) + " |")
  glue = [t.split("/")[1] for t in GLUE_MAIN if t in args.tasks]
  if glue:
    label = "GLUE avg" + ("" if len(glue) == len(GLUE_MAIN) else f" ({', '.join(glue)})")
    rows.append(f"| {label} | main metrics | " + " | ".join(
        "-" if s["glue_avg"] is None else f"{s['glue_avg']:.1f}"
        for s in encoders.values()) + " |")
  if len(args.tasks) > 1:
    rows.append("| average | main metrics (all tasks) | " + " | ".join(
        "-" if s["task_avg"] is None else f"{s['task_avg']:.1f}"
        for s in encoders.values()) + " |")
  return "\n".join(rows)


def plot(results: dict, tasks: list, path: str):
  """Each task's main metric, and their average, against pre-training FLOPs, as the
  paper's Figure 1; random weights (no FLOPs) as a dashed line."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  encoders = results["encoders"]
  panels = [(f"{t} {MAIN_METRIC[t]}", lambda s, t=t: s["tasks"].get(t, {}).get(
      MAIN_METRIC[t], {}).get("median")) for t in tasks]
  if len(tasks) > 1:
    panels.append(("average of the tasks", lambda s: s["task_avg"]))
  fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.6), squeeze=False)
  # The judged points' FLOPs are the ticks: a study spans about a decade, where the log
  # axis's own minor labels (2e14, 3e14, ...) run into each other.
  ticks = sorted({s["train_flops"] for s in encoders.values() if s["train_flops"]})
  for ax, (title, score) in zip(axes[0], panels):
    for arm, style in (("electra", "o-"), ("mlm", "s-")):
      points = sorted((s["train_flops"], score(s)) for s in encoders.values()
                      if s["arm"] == arm and score(s) is not None)
      if points:
        ax.plot(*zip(*points), style, label=arm)
    if score(encoders["random"]) is not None:
      ax.axhline(score(encoders["random"]), linestyle="--", color="gray",
                 label="random init")
    ax.set_xscale("log")
    ax.set_xticks(ticks, [f"{t:.1e}" for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel("pre-training FLOPs")
    ax.set_title(title)
  axes[0][0].set_ylabel("dev score (median of seeds)")
  axes[0][0].legend()
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def report(args, plan) -> str:
  results = collect(args, plan)
  text = table(args, results)
  write_json(os.path.join(args.home, "results.json"), results)
  with atomic_write(os.path.join(args.home, "results.md")) as f:
    f.write(text + "\n")
  if plan["arms"]:  # given encoders have no FLOPs to plot against
    plot(results, args.tasks, os.path.join(args.home, "scores_vs_flops.png"))
  return text


# ---- main ------------------------------------------------------------------------------

def parse_args(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.error = fail  # one line, as the project's commands
  parser.add_argument("--work-dir", default=os.path.join("data", "compute_efficiency"))
  parser.add_argument("--shared-data", default=SHARED_DATA,
                      help="holds corpus/, glue/, conll2000/ and squad/")
  parser.add_argument("--model-size", default="tiny",
                      help="the recipe: configs/pretraining/ and configs/finetuning/")
  parser.add_argument("--vocab-size", type=int, default=8192)
  # Pre-training costs ~1.4 s of wall time per electra step: electra ~1.05 s/step and
  # mlm ~0.85 s/step (tiny, one core each, side by side), and mlm takes 1.63x the steps
  # (the FLOPs count embedding lookups as one-hot matmuls). 2600 steps take ~60 min.
  parser.add_argument("--budget-steps", type=int, default=0,
                      help="the electra arm's steps (default, 0: the preset's)")
  parser.add_argument("--tasks", default=None,
                      help="comma-separated (default: all); --table: those of the last run")
  parser.add_argument("--judge", choices=JUDGES, default="original",
                      help="original: the original's fine-tuning recipe, a rate grid, "
                      "seeds on every task; short: SCHEDULES (the first study's)")
  parser.add_argument("--encoders", type=encoder_list, default=None,
                      help="judge these instead of pre-training: NAME=PATH (any "
                      "--init-checkpoint of run_finetuning.py) or random, comma-separated")
  parser.add_argument("--fractions", type=fraction_list, default=FRACTIONS,
                      help="the points of each pre-training arm judged, as fractions "
                      "of its run in eighths (default %(default)s)")
  parser.add_argument("--trials", type=int, default=3,
                      help="seeds per task (--judge short: per GLUE task)")
  parser.add_argument("--lr-grid", default=None,
                      help="--judge original's learning rates, the same for every "
                      "encoder (default 1e-4,3e-4,1e-3)")
  parser.add_argument("--sst2-cap", type=int, default=None,
                      help="--judge original: SST-2's training examples, the same for "
                      "every encoder (default 20000; 0: all); with "
                      "--max-train-examples, SST-2's own cap")
  parser.add_argument("--max-train-examples", type=int, default=None,
                      help="cut every training set to N examples (SQuAD: questions); 0: "
                      "full sets; default: the judge's (short: SCHEDULES' per-task "
                      "sizes; original: whole sets, SST-2 --sst2-cap)")
  parser.add_argument("--squad-train-articles", type=int, default=38)
  parser.add_argument("--pretrain-hparams", type=json_object, default={},
                      help="JSON merged into both pre-training arms' hparams")
  # The masked LM has no discriminator, so disc_lr_multiplier does not reach it: its
  # own rate (e.g. {"learning_rate": 1e-4}) is how it gets the same lever.
  parser.add_argument("--mlm-hparams", type=json_object, default={},
                      help="JSON merged into the masked-LM arm's hparams, after "
                      "--pretrain-hparams")
  parser.add_argument("--finetune-hparams", type=json_object, default={},
                      help="JSON merged into every fine-tuning run's hparams")
  parser.add_argument("--jobs", type=int, default=2, help="subprocesses at once")
  parser.add_argument("--table", action="store_true",
                      help="print the results of a study so far; run nothing")
  args = parser.parse_args(argv)
  if args.judge == "short":
    for flag in ("lr_grid", "sst2_cap"):
      if getattr(args, flag) is not None:
        fail(f"--{flag.replace('_', '-')} is the original judge's; drop it or use "
             "--judge original")
  sst2_given = args.sst2_cap is not None
  if args.judge != "short":
    args.sst2_cap = 20000 if args.sst2_cap is None else args.sst2_cap
    args.lr_grid = rate_list(args.lr_grid or "1e-4,3e-4,1e-3")
    if "learning_rate" in args.finetune_hparams:
      fail("--finetune-hparams: learning_rate is --lr-grid's under --judge original")
  args.home = judge_home(args.work_dir, args.judge)
  # None: all (--table: the last run's).
  args.tasks = None if args.tasks is None else [t for t in args.tasks.split(",") if t]
  judged = SCHEDULES if args.judge == "short" else JUDGED_TASKS
  unknown = [t for t in args.tasks or judged if t not in judged]
  if unknown or args.tasks == []:
    fail(f"--tasks: {', '.join(unknown) or '(none given)'} not among --judge "
         f"{args.judge}'s tasks: {', '.join(judged)}")
  for flag in ("vocab_size", "trials", "jobs", "squad_train_articles"):
    if getattr(args, flag) < 1:
      fail(f"--{flag.replace('_', '-')} must be at least 1")
  if 0 < args.budget_steps < 8 or args.budget_steps < 0:
    fail("--budget-steps must be at least 8 (a checkpoint at each eighth), or 0")
  for flag in ("max_train_examples", "sst2_cap"):
    if (getattr(args, flag) or 0) < 0:
      fail(f"--{flag.replace('_', '-')} must not be negative")
  for what in ("pretraining", "finetuning"):
    if not os.path.isfile(os.path.join(ROOT, "configs", what, args.model_size + ".json")):
      fail(f"--model-size {args.model_size}: no configs/{what}/{args.model_size}.json")
  if not args.table:
    missing = [p for p in ("corpus", "glue", "conll2000", "squad/dev-v1.1.json")
               if not os.path.exists(os.path.join(args.shared_data, p))]
    if missing:
      fail(f"--shared-data {args.shared_data}: missing {', '.join(missing)}")
  if args.max_train_examples is not None:
    args.caps = {t: args.sst2_cap if t == "glue/sst2" and sst2_given else
                 args.max_train_examples for t in SCHEDULES}
  elif args.judge == "short":
    args.caps = {t: s["max_train_examples"] for t, s in SCHEDULES.items()}
  else:
    args.caps = {t: args.sst2_cap if t == "glue/sst2" else 0 for t in SCHEDULES}
  return args


def fraction_list(text: str) -> list:
  """--fractions: distinct eighths of a run, ascending, written as Fraction writes them
  ("1/4", "1"): the encoders' names."""
  try:
    given = [fractions.Fraction(f.strip()) for f in text.split(",") if f.strip()]
  except (ValueError, ZeroDivisionError):
    given = []
  if not given or any(not 0 < f <= 1 or (f * 8).denominator != 1 for f in given) or \
      len(set(given)) < len(given):
    raise argparse.ArgumentTypeError(
        f"{text!r}: expected distinct fractions of the run in eighths, e.g. 1/8,1/2,1")
  return [str(f) for f in sorted(given)]


def encoder_list(text: str) -> dict:
  """--encoders: {name: path, or None for random weights}."""
  encoders = {}
  for item in (i.strip() for i in text.split(",") if i.strip()):
    name, given, path = (p.strip() for p in item.partition("="))
    if not re.fullmatch(r"[\w.@/-]+", name) or name in encoders:
      raise argparse.ArgumentTypeError(f"{name!r}: expected distinct names of letters, "
                                       "digits and _.@/-")
    if bool(given) == (name == "random") or (given and not path):
      raise argparse.ArgumentTypeError(f"{item!r}: expected NAME=PATH, or random alone")
    if path and not os.path.exists(path):
      raise argparse.ArgumentTypeError(f"{name}: no such path {path}")
    encoders[name] = path or None
  if not encoders:
    raise argparse.ArgumentTypeError("no encoder given")
  return encoders


def rate_list(text: str) -> list:
  """--lr-grid: distinct positive rates, in the given order."""
  try:
    rates = [float(r) for r in text.split(",") if r.strip()]
  except ValueError:
    fail(f"--lr-grid {text}: expected comma-separated numbers, e.g. 1e-4,3e-4,1e-3")
  if not rates or min(rates) <= 0 or len(set(rates)) < len(rates):
    fail(f"--lr-grid {text}: expected distinct positive rates")
  return rates


def main(argv=None) -> int:
  args = parse_args(argv)
  plan_file = os.path.join(args.work_dir, "plan.json")
  judge_file = os.path.join(args.home, "judge.json")
  # What the encoders depend on (a work dir serves one setting), and what a judge's
  # results do (each judge's own, so that both can judge one study's encoders).
  settings = {k: getattr(args, k) for k in (
      "model_size", "vocab_size", "budget_steps", "squad_train_articles",
      "pretrain_hparams", "mlm_hparams", "encoders", "fractions")}
  judge_settings = {k: getattr(args, k) for k in JUDGE_SETTINGS[args.judge]}
  saved = read_json(plan_file)
  # Studies made before there were judges kept the short judge's settings and tasks in
  # plan.json.
  judged = read_json(judge_file) or (
      saved if args.judge == "short" and "tasks" in (saved or {}) else None)
  if args.table:
    if not saved or not judged:
      fail(f"{args.home}: no results of the {args.judge} judge here yet")
    args.tasks = args.tasks or judged["tasks"]
    args.lr_grid = judged["settings"].get("lr_grid")
    print(report(args, saved["plan"]))
    return 0
  for what, before, now in (("a study", saved, settings),
                            (f"the {args.judge} judge's runs", judged, judge_settings)):
    # (Studies made before --fractions judged its default.)
    changed = [k for k in now if before and before["settings"].get(
        k, fraction_list(FRACTIONS) if k == "fractions" else None) != now[k]]
    if changed:
      fail(f"{args.work_dir} holds {what} with other settings ({', '.join(changed)}); "
           "use another --work-dir")
  args.tasks = args.tasks or list(SCHEDULES if args.judge == "short" else JUDGED_TASKS)
  os.makedirs(args.home, exist_ok=True)
  signal.signal(signal.SIGTERM, signal.default_int_handler)  # stop as Ctrl-C does
  t0 = time.time()
  timings = Timings(os.path.join(args.work_dir, "timings.json"))
  try:
    prepare_data(args, timings)
    plan = saved["plan"] if saved else make_plan(args)
    if not saved:
      write_json(plan_file, {"settings": settings, "plan": plan})
    write_json(judge_file, {"settings": judge_settings, "tasks": args.tasks})
    for arm, spec in plan["arms"].items():
      print(f"{arm}: {spec['num_train_steps']} steps x {spec['train_flops_per_step']:.3g}"
            f" = {spec['train_flops_total']:.3g} training FLOPs", flush=True)
    if args.lr_grid:
      steps = planned_steps(args)
      per_encoder = sum(steps.values()) * args.trials * len(args.lr_grid)
      print(f"the original judge: ({' + '.join(f'{t} {n}' for t, n in steps.items())}) "
            f"steps x {args.trials} seeds x {len(args.lr_grid)} rates = {per_encoder} "
            f"fine-tuning steps per encoder; {per_encoder * len(plan['encoders'])} for "
            f"the {len(plan['encoders'])} encoders", flush=True)
    failed = run_units(units_of(args, plan), args.jobs, args.work_dir, timings)
  except KeyboardInterrupt:
    print("interrupted; run the same command again to resume", file=sys.stderr)
    return 130
  print(report(args, plan))
  print(f"\nwall time (all runs so far; this one {(time.time() - t0) / 60:.1f} min):\n"
        + timings.summary())
  if failed:
    print(f"error: {len(failed)} unit(s) failed: {', '.join(failed)}", file=sys.stderr)
    return 1
  return 0


if __name__ == "__main__":
  sys.exit(main())
