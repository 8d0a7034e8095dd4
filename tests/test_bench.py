"""bench/ as a package on the commands' seams: `python -m bench.<name>` with the project
on the path, a bench end to end in its child process (the debug model, one step:
seconds, not a benchmark), and the fine-tuning step the benches time is
run_finetuning.py's."""

import json
import math
import subprocess
import sys

import numpy as np

from bench.steps import finetuning_step
from finetune.modeling import FinetuningModel
from tests.conftest import shared_path


def bench(name: str, *flags: str) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, "-m", f"bench.{name}", *flags],
                        capture_output=True, text=True, timeout=300, check=False)


def test_bench_pretraining_runs_as_a_module_and_measures_a_step_in_a_child():
  usage = bench("bench_pretraining", "--help")
  assert usage.returncode == 0 and "--impls" in usage.stdout, usage.stderr[-2000:]
  shared_path("vocab", "bert_uncased_vocab.txt")  # its default --vocab-file
  run = bench("bench_pretraining", "--model-size", "debug", "--batch-size", "4",
              "--seq-length", "32", "--steps", "1", "--impls", "ours")
  assert run.returncode == 0, run.stderr[-3000:]
  lines = run.stdout.strip().splitlines()
  result = json.loads(lines[0])
  assert result["impl"] == "ours" and result["model"] == "electra_debug"
  assert result["steps_per_s"] > 0 and result["peak_rss_mib"] > 100  # the child's own
  assert result["isa"] == "native"
  assert lines[2].startswith("| ours | ") and json.loads(lines[-1])["ours"]["peak_rss_mib"]

  # An AVX2-only CPU emulated, with ours' oneDNN forced off (TensorFlow's own choice on
  # one): the child reads the CPU as AVX2-only and gets the setting.
  emulated = bench("bench_pretraining", "--model-size", "debug", "--batch-size", "4",
                   "--seq-length", "32", "--steps", "1", "--isa", "avx2",
                   "--onednn", "off")
  assert emulated.returncode == 0, emulated.stderr[-3000:]
  result = json.loads(emulated.stdout.strip().splitlines()[0])
  assert (result["isa"], result["onednn"]) == ("avx2", "0")


def test_the_benches_finetuning_step_is_the_commands(tmp_path):
  shared_path("vocab", "bert_uncased_vocab.txt")
  rng = np.random.default_rng(0)
  ids = rng.integers(1000, 30522, (4, 16)).astype(np.int32)
  features = {"input_ids": ids, "input_mask": np.ones_like(ids),
              "segment_ids": np.zeros_like(ids),
              "label": rng.integers(0, 2, 4).astype(np.float32)}
  loop, step = finetuning_step("glue/sst2", features, 2, {
      "model_size": "debug", "train_batch_size": 4, "max_seq_length": 16}, str(tmp_path))
  assert isinstance(loop.model, FinetuningModel) and list(loop.model.heads) == [
      "glue/sst2"]
  assert all(math.isfinite(float(step())) for _ in range(2))
  assert int(loop.step.numpy()) == 2
