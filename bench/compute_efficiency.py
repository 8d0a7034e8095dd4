"""ELECTRA vs BERT-style masked LM at equal pre-training compute (paper Figure 1, Table 1).

  python -m bench.compute_efficiency           # the whole study; re-run to resume
  python -m bench.compute_efficiency --table   # re-print the results, run nothing

An experiment run by hand (tests/test_compute_efficiency.py runs a tiny version). In
<work-dir>:
1. data: records and a --vocab-size vocabulary learned from <shared-data>/corpus
   (build_pretraining_dataset.py); finetuning_data/ with the GLUE folders, chunk/
   (CoNLL-2000) and squadv1/ (the SQuAD 1.1 dev file split by article, as
   bench.exp_transfer does), training files cut to SCHEDULES' sizes.
2. pre-training (run_pretraining.py), the recipe's preset (configs/pretraining/<size>)
   for both arms: "electra" for --budget-steps steps, and "mlm" (electra_objective false:
   one full-size encoder, as BERT) for as many steps as make the same training FLOPs
   (the objective's flops(), pretrain/objectives/). Checkpoints of each run at 1/4, 1/2 and all of its FLOPs
   are exported for fine-tuning (the schedule is the full run's, as in the paper).
3. fine-tuning (run_finetuning.py) of those six encoders and a random one with one
   recipe (configs/finetuning/<size> + SCHEDULES); GLUE tasks take the median of
   --trials seeds.
4. results.md / results.json (one column per encoder) and glue_vs_flops.png.
Every unit (pre-training arm, encoder x task) is skipped once its results exist, and
Ctrl-C lets running ones save, so re-running the command resumes; timings.json keeps
each unit's wall time. On this 2-core CPU, --jobs 2: pre-training ~1.4 s per
--budget-steps step (2600 steps ~60 min), fine-tuning ~60 min (costs at SCHEDULES).
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time

from bench import ROOT, SHARED_DATA
from bench.exp_transfer import split_squad
from util.files import atomic_write

FRACTIONS = ("1/4", "1/2", "1")
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
  out = os.path.join(args.work_dir, "finetuning_data")
  cap = lambda task: args.caps.get(task, 0)
  for task, folder in GLUE_FOLDERS.items():
    # CoLA's files have no header row (as GLUE distributes them); the others do.
    mirror_task(os.path.join(args.shared_data, "glue", folder), os.path.join(out, folder),
                "train.tsv", cap(task), header=task != "glue/cola")
  mirror_task(os.path.join(args.shared_data, "conll2000"), os.path.join(out, "chunk"),
              "train.txt", cap("chunk"), header=False, blank_separated=True)
  split_squad(os.path.join(args.shared_data, "squad", "dev-v1.1.json"), args.work_dir,
              args.squad_train_articles, cap("squad/v1.1"))


def prepare_data(args, timings):
  """Records, vocabulary and fine-tuning data, unless a previous run made them."""
  records = os.path.join(args.work_dir, "pretrain_tfrecords")
  marker = os.path.join(args.work_dir, "finetuning_data", "done.json")
  if os.path.isdir(records) and os.listdir(records) and read_json(marker) == args.caps:
    return timings.record("data", "data", 0.0, "skipped")
  t0 = time.time()
  print("data: records, vocabulary and fine-tuning data", flush=True)
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
  write_finetuning_data(args)
  write_json(marker, args.caps)
  timings.record("data", "data", time.time() - t0, "ran")


# ---- the plan ------------------------------------------------------------------------

def make_plan(args) -> dict:
  """Each arm's steps, FLOPs and checkpoints, and the encoders to fine-tune."""
  from data_prep.vocab import load_vocab  # pylint: disable=g-import-not-at-top
  from pretrain import config as pretrain_config  # pylint: disable=g-import-not-at-top
  from pretrain.objectives import objective_for  # pylint: disable=g-import-not-at-top
  # A learned vocabulary may fall short of --vocab-size.
  vocab_size = len(load_vocab(os.path.join(args.work_dir, "vocab.txt")))
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
    steps = max(4, round(budget / per_step))
    # Checkpoints every `interval` steps, a divisor of a quarter run (so 1/4 and 1/2
    # are saved) near the preset's interval (so a hard kill loses little), all kept.
    quarter = round(steps / 4)
    interval = next(d for d in range(min(config.save_checkpoints_steps, quarter),
                                     quarter + 1) if quarter % d == 0)
    hparams.update(num_train_steps=steps, save_checkpoints_steps=interval,
                   keep_checkpoint_max=steps // interval + 10)  # + room for interruptions
    export = os.path.join(args.work_dir, "models", name, "export")
    for fraction, step in zip(FRACTIONS, (quarter, 2 * quarter, steps)):
      # The end of the run is run_pretraining.py's own export; others go to step_N.
      encoders[f"{arm}@{fraction}"] = {
          "arm": arm, "step": step, "train_flops": step * per_step,
          "init_checkpoint": export if step == steps else os.path.join(
              export, f"step_{step}")}
    arms[arm] = {"model_name": name, "num_train_steps": steps,
                 "train_flops_per_step": per_step, "train_flops_total": steps * per_step,
                 "hparams": hparams, "export_steps": [quarter, 2 * quarter]}
  encoders["random"] = {"arm": "random", "step": 0, "train_flops": 0.0,
                        "init_checkpoint": ""}
  return {"vocab_size": vocab_size, "arms": arms, "encoders": encoders}


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
  # Random init first: it needs no pre-training, so it fills idle cores. Then the
  # longest pre-training first, both arms side by side, so that a study cut short
  # still compares the arms at equal compute.
  order = {"random": 0, "1": 1, "1/2": 2, "1/4": 3}
  for encoder in sorted(plan["encoders"], key=lambda e: order[e.partition("@")[2] or e]):
    spec = plan["encoders"][encoder]
    for task in args.tasks:
      schedule = {k: v for k, v in SCHEDULES[task].items() if k != "max_train_examples"}
      hparams = {"model_size": args.model_size, "vocab_size": plan["vocab_size"],
                 "num_trials": 1 if task in NO_TRIALS else args.trials,
                 "results_dir": results_dir(args.work_dir, encoder), **schedule,
                 "export_serving": False,  # the study wants scores, not servable models
                 **args.finetune_hparams}
      command = [python, os.path.join(ROOT, "run_finetuning.py"), "--task", task,
                 "--model-name", encoder_dir(encoder), "--data-dir", args.work_dir,
                 "--hparams", json.dumps(hparams)]
      if spec["init_checkpoint"]:
        command += ["--init-checkpoint", spec["init_checkpoint"]]
      units.append((f"finetune {encoder} {task}", f"finetune {spec['arm']}", command,
                    [results_file(args.work_dir, encoder, task)],
                    [] if spec["arm"] == "random" else [f"pretrain {spec['arm']}"]))
  return units


def encoder_dir(encoder: str) -> str:
  return "finetune_" + encoder.replace("@", "_").replace("/", "of")


def results_dir(work_dir: str, encoder: str) -> str:
  return os.path.join(work_dir, "results", encoder_dir(encoder))


def results_file(work_dir: str, encoder: str, task: str) -> str:
  # run_finetuning.py's name for a single task's results (FinetuningConfig.results_file).
  return os.path.join(results_dir(work_dir, encoder),
                      f"{task.replace('/', '_')}_results.json")


def run_units(units, jobs: int, work_dir: str, timings: Timings) -> list:
  """Runs the units' commands, `jobs` at a time, each once the units it waits for are
  done; a unit whose results exist is skipped. Returns the names of failed units.
  Ctrl-C (or SIGTERM) passes SIGINT on, so runs save before they stop."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
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

def collect(args, plan) -> dict:
  """Each encoder's FLOPs, per-task summaries (median and trials) and GLUE average."""
  encoders = {}
  for encoder, spec in plan["encoders"].items():
    tasks = {}
    for task in args.tasks:
      report = read_json(results_file(args.work_dir, encoder, task))
      if report:  # keys "<task> <split> <metric>" -> {"median", "trials"}
        tasks[task] = {k.split(" ")[-1]: v for k, v in report["summary"].items()}
    glue = [t for t in GLUE_MAIN if t in args.tasks]
    glue_avg = statistics.mean(tasks[t][GLUE_MAIN[t]]["median"] for t in glue) if glue and \
        all(t in tasks for t in glue) else None
    encoders[encoder] = {**spec, "tasks": tasks, "glue_avg": glue_avg}
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
  glue = [t.split("/")[1] for t in GLUE_MAIN if t in args.tasks]
  if glue:
    label = "GLUE avg" + ("" if len(glue) == len(GLUE_MAIN) else f" ({', '.join(glue)})")
    rows.append(f"| {label} | main metrics | " + " | ".join(
        "-" if s["glue_avg"] is None else f"{s['glue_avg']:.1f}"
        for s in encoders.values()) + " |")
  return "\n".join(rows)


def plot(results: dict, path: str):
  """GLUE average against pre-training FLOPs, as the paper's Figure 1."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, ax = plt.subplots(figsize=(6, 4))
  encoders = results["encoders"]
  for arm, style in (("electra", "o-"), ("mlm", "s-")):
    points = [(s["train_flops"], s["glue_avg"]) for s in encoders.values()
              if s["arm"] == arm and s["glue_avg"] is not None]
    if points:
      ax.plot(*zip(*points), style, label=arm)
  if encoders["random"]["glue_avg"] is not None:
    ax.axhline(encoders["random"]["glue_avg"], linestyle="--", color="gray",
               label="random init")
  ax.set_xscale("log")
  ax.set_xlabel("pre-training FLOPs")
  ax.set_ylabel("GLUE average (dev)")
  ax.legend()
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def report(args, plan) -> str:
  results = collect(args, plan)
  text = table(args, results)
  write_json(os.path.join(args.work_dir, "results.json"), results)
  with atomic_write(os.path.join(args.work_dir, "results.md")) as f:
    f.write(text + "\n")
  plot(results, os.path.join(args.work_dir, "glue_vs_flops.png"))
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
  parser.add_argument("--trials", type=int, default=3, help="seeds per GLUE task")
  parser.add_argument("--max-train-examples", type=int, default=None,
                      help="cut every training set to N examples (SQuAD: questions); 0: "
                      "full sets; default: SCHEDULES' per-task sizes")
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
  # None: all (--table: the last run's).
  args.tasks = None if args.tasks is None else [t for t in args.tasks.split(",") if t]
  unknown = [t for t in args.tasks or SCHEDULES if t not in SCHEDULES]
  if unknown or args.tasks == []:
    fail(f"--tasks: unknown {', '.join(unknown) or '(none given)'}; choose from "
         f"{', '.join(SCHEDULES)}")
  for flag in ("vocab_size", "trials", "jobs", "squad_train_articles"):
    if getattr(args, flag) < 1:
      fail(f"--{flag.replace('_', '-')} must be at least 1")
  if args.budget_steps in (1, 2, 3) or args.budget_steps < 0:
    fail("--budget-steps must be at least 4 (a checkpoint at each quarter), or 0")
  if (args.max_train_examples or 0) < 0:
    fail("--max-train-examples must not be negative")
  for what in ("pretraining", "finetuning"):
    if not os.path.isfile(os.path.join(ROOT, "configs", what, args.model_size + ".json")):
      fail(f"--model-size {args.model_size}: no configs/{what}/{args.model_size}.json")
  if not args.table:
    missing = [p for p in ("corpus", "glue", "conll2000", "squad/dev-v1.1.json")
               if not os.path.exists(os.path.join(args.shared_data, p))]
    if missing:
      fail(f"--shared-data {args.shared_data}: missing {', '.join(missing)}")
  args.caps = {t: s.get("max_train_examples", 0) if args.max_train_examples is None
               else args.max_train_examples for t, s in SCHEDULES.items()}
  return args


def main(argv=None) -> int:
  args = parse_args(argv)
  plan_file = os.path.join(args.work_dir, "plan.json")
  # What the results depend on; a work dir serves one setting.
  settings = {k: getattr(args, k) for k in (
      "model_size", "vocab_size", "budget_steps", "trials", "caps", "squad_train_articles",
      "pretrain_hparams", "mlm_hparams", "finetune_hparams")}
  saved = read_json(plan_file)
  if args.table:
    if not saved:
      fail(f"{plan_file}: no study here yet")
    args.tasks = args.tasks or saved["tasks"]
    print(report(args, saved["plan"]))
    return 0
  if saved and saved["settings"] != settings:
    changed = [k for k in settings if saved["settings"].get(k) != settings[k]]
    fail(f"{args.work_dir} holds a study with other settings ({', '.join(changed)}); "
         "use another --work-dir")
  args.tasks = args.tasks or list(SCHEDULES)
  os.makedirs(args.work_dir, exist_ok=True)
  signal.signal(signal.SIGTERM, signal.default_int_handler)  # stop as Ctrl-C does
  t0 = time.time()
  timings = Timings(os.path.join(args.work_dir, "timings.json"))
  try:
    prepare_data(args, timings)
    plan = saved["plan"] if saved else make_plan(args)
    write_json(plan_file, {"settings": settings, "plan": plan, "tasks": args.tasks})
    for arm, spec in plan["arms"].items():
      print(f"{arm}: {spec['num_train_steps']} steps x {spec['train_flops_per_step']:.3g}"
            f" = {spec['train_flops_total']:.3g} training FLOPs", flush=True)
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
