"""Two workers on one host (127.0.0.1) against one worker, same global batch.

    python -m bench.bench_multi_worker [--steps 200] [--batch-size 32] [--work-dir DIR]

Builds a small pre-training dataset from ../shared/data (the first --corpus-mb MB of the
English corpus, a learned 4,000-token vocabulary, 4 shards), then pre-trains the debug
model with run_pretraining.py twice: one worker (2 threads), and two workers
(distribution_strategy "multi_worker", TF_CONFIG per worker, 1 thread each, one shared
model dir). Each worker reads its own shards and draws its own masks, so the two runs
see different examples: their curves agree within batch noise, not step for step.
Prints windowed mean losses of both, the wall times, and one JSON line of the figures.
"""

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import time
from typing import Dict, List

from bench import ROOT, SHARED_DATA, child
from training.curves import LOG_NAME, read_log
from util import cli

CORPUS = os.path.join(SHARED_DATA, "corpus", "english_corpus.txt")
EPHEMERAL_PORTS = "/proc/sys/net/ipv4/ip_local_port_range"


def loopback_cluster(workers: int) -> Dict[str, List[str]]:
  """A TF_CONFIG "cluster" of `workers` workers on 127.0.0.1, each at its own free port
  (this bench's, and the multi-worker tests').

  The ports lie outside the kernel's ephemeral range, from which every outgoing
  connection (another run's gRPC clients, say) takes its local port: a port there could
  be taken before the worker binds it. Each probe socket stays bound until all ports are
  chosen, so no two workers get the same one; the random start keeps processes that
  choose at the same time apart.
  """
  try:
    with open(EPHEMERAL_PORTS, encoding="ascii") as f:
      low, high = (int(n) for n in f.read().split())
  except (OSError, ValueError):  # not Linux: the IANA dynamic range
    low, high = 49152, 65535
  candidates = [p for p in range(1024, 65536) if not low <= p <= high]
  start = random.Random().randrange(len(candidates))
  held = []
  try:
    for port in candidates[start:] + candidates[:start]:
      if len(held) == workers:
        break
      probe = socket.socket()
      try:
        probe.bind(("127.0.0.1", port))
      except OSError:  # in use
        probe.close()
        continue
      held.append(probe)
    if len(held) < workers:
      raise OSError(f"fewer than {workers} free ports outside the ephemeral range "
                    f"{low}-{high} on 127.0.0.1")
    return {"worker": [f"127.0.0.1:{s.getsockname()[1]}" for s in held]}
  finally:
    for probe in held:
      probe.close()


def build_data(work_dir: str, corpus_mb: float) -> str:
  data_dir = os.path.join(work_dir, "data")
  if os.path.isdir(os.path.join(data_dir, "pretrain_tfrecords")):
    return data_dir
  corpus_dir = os.path.join(work_dir, "corpus")
  os.makedirs(corpus_dir, exist_ok=True)
  with open(CORPUS, "rb") as f:
    text = f.read(int(corpus_mb * (1 << 20)))
  with open(os.path.join(corpus_dir, "part.txt"), "wb") as f:
    f.write(text[:text.rfind(b"\n") + 1])
  build = subprocess.run([sys.executable, "build_pretraining_dataset.py", "--corpus-dir",
                          corpus_dir, "--data-dir", data_dir, "--vocab-size", "4000",
                          "--num-out-files", "4", "--no-progress"], cwd=ROOT,
                         stderr=subprocess.PIPE, text=True, check=False)
  if build.returncode:
    raise child.failed("build_pretraining_dataset.py", build.returncode, build.stderr)
  return data_dir


def pretrain(data_dir: str, model_dir: str, hparams: dict, workers: int) -> float:
  """Runs run_pretraining.py with `workers` processes; returns the wall seconds."""
  cluster = loopback_cluster(workers)
  threads = str(2 // workers)
  processes = []
  start = time.time()
  for index in range(workers):
    env = dict(os.environ, TF_NUM_INTRAOP_THREADS=threads, TF_NUM_INTEROP_THREADS="1",
               TF_CPP_MIN_LOG_LEVEL="2")
    run_hparams = dict(hparams, model_dir=model_dir)
    if workers > 1:
      env["TF_CONFIG"] = json.dumps({"cluster": cluster,
                                     "task": {"type": "worker", "index": index}})
      run_hparams["distribution_strategy"] = "multi_worker"
    processes.append(subprocess.Popen(
        [sys.executable, "run_pretraining.py", "--model-name", "electra_small",
         "--data-dir", data_dir, "--hparams", json.dumps(run_hparams)],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
  for index, process in enumerate(processes):
    _, err = process.communicate()
    if process.returncode:
      raise child.failed(f"worker {index}", process.returncode, err)
  return time.time() - start


def windows(log, name: str, width: int):
  steps = sorted(s for s in log if name in log[s])
  return {end: sum(log[s][name] for s in steps if end - width < s <= end) /
          max(1, sum(1 for s in steps if end - width < s <= end))
          for end in range(width, steps[-1] + 1, width)}


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--steps", type=int, default=200)
  parser.add_argument("--batch-size", type=int, default=32)
  parser.add_argument("--corpus-mb", type=float, default=2.0)
  parser.add_argument("--work-dir", default="/tmp/bench_multi_worker")
  args = parser.parse_args(argv)
  cli.check_flags(parser, args, steps={"at_least": 1}, batch_size={"at_least": 1},
                  corpus_mb={"kind": float, "above": 0})
  cli.check_given(parser, args, "work_dir")
  return cli.run_command(lambda: compare(args))


def compare(args: argparse.Namespace) -> int:
  """One worker, then two, on the same data; their windowed losses and wall times."""
  data_dir = build_data(args.work_dir, args.corpus_mb)
  hparams = {"debug": True, "num_train_steps": args.steps, "log_every_steps": 1,
             "train_batch_size": args.batch_size, "max_seq_length": 128,
             "num_warmup_steps": args.steps // 10, "learning_rate": 1e-3,
             "save_checkpoints_steps": args.steps, "overwrite_model_dir": True}
  logs, seconds = {}, {}
  for name, workers in (("one_worker", 1), ("two_workers", 2)):
    model_dir = os.path.join(args.work_dir, "models", name)
    seconds[name] = pretrain(data_dir, model_dir, hparams, workers)
    logs[name] = read_log(os.path.join(model_dir, LOG_NAME))
  width = max(1, args.steps // 5)
  curves = {name: windows(log, "loss", width) for name, log in logs.items()}
  print(f"mean loss over windows of {width} steps (global batch {args.batch_size})")
  print("step   one worker   two workers")
  for end in curves["one_worker"]:
    print(f"{end:>4}   {curves['one_worker'][end]:>10.4f}   "
          f"{curves['two_workers'].get(end, float('nan')):>11.4f}")
  print(f"wall: one worker (2 threads) {seconds['one_worker']:.0f} s, two workers "
        f"(1 thread each) {seconds['two_workers']:.0f} s")
  print(json.dumps({"steps": args.steps, "global_batch": args.batch_size,
                    "window": width, "loss_windows": curves, "wall_s": seconds}))
  return 0


if __name__ == "__main__":
  sys.exit(main())
