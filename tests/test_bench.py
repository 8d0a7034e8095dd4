"""bench/ as a package on the commands' seams: `python -m bench.<name>` with the project
on the path, a bench end to end in its child process (the debug model, one step:
seconds, not a benchmark), the fine-tuning step the benches time is run_finetuning.py's,
both sides of bench_finetuning --task train on the same real batches (small files the
tests write), and the rows of the comparison with the PyTorch peer (bench/peers.py):
chosen by flags, one line where a row cannot run or its child failed. The compiled peer's own step is not run here: its
compilation takes minutes on a loaded 2-core machine."""

import argparse
import json
import math
import subprocess
import sys

import numpy as np
import pytest

from bench import bench_finetuning, bench_islands, bench_pretraining, child, peers
from bench import steps as bench_steps
from bench.steps import finetuning_step
from finetune.config import FinetuningConfig
from finetune.modeling import FinetuningModel
from tests.helpers import shared_path
from util import cpu


def bench(name: str, *flags: str) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, "-m", f"bench.{name}", *flags],
                        capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.slow
def test_bench_pretraining_runs_as_a_module_and_measures_a_step_in_a_child(
    monkeypatch, capsys):
  """`python -m bench.bench_pretraining` (its flags; the benches measure as modules in
  tests/test_bench_inference.py and bench_finetuning's test); its rows in-process (the
  bench's own part; the child is a process of its own) on an AVX2-only CPU emulated,
  with ours' oneDNN forced off (TensorFlow's own choice on one): the child reads the
  CPU as AVX2-only and gets the setting."""
  usage = bench("bench_pretraining", "--help")
  assert usage.returncode == 0 and "--impls" in usage.stdout, usage.stderr[-2000:]
  vocab = shared_path("vocab", "bert_uncased_vocab.txt")  # its default --vocab-file
  capsys.readouterr()
  assert bench_pretraining.main([
      "--model-size", "debug", "--batch-size", "4", "--seq-length", "32", "--steps", "1",
      "--impls", "ours", "--isa", "avx2", "--onednn", "off"]) == 0
  lines = capsys.readouterr().out.strip().splitlines()
  result = json.loads(lines[0])
  assert result["impl"] == "ours" and result["model"] == "electra_debug"
  assert result["steps_per_s"] > 0 and result["peak_rss_mib"] > 100  # the child's own
  assert (result["isa"], result["onednn"]) == ("avx2", "0")
  # The first step (tracing) apart, and the fraction of the peak of the CPU's cores
  # (as the child reads them: AVX2's).
  assert result["first_step_s"] > 0 and (result["peer"], result["precision"]) == (
      None, "float32")
  monkeypatch.setenv(cpu.ASSUME_CPU_ENV, "avx2")
  peak = cpu.cpu_peak_flops()  # 0 where the CPU states no maximum clock: no fraction
  assert result.get("peak_fraction") == (pytest.approx(
      bench_pretraining.step_flops("debug", 4, 32, vocab) * result["steps_per_s"]
      / peak, rel=2e-3) if peak else None)
  assert lines[2].startswith("| ours | ") and json.loads(lines[-1])["ours"]["peak_rss_mib"]


@pytest.mark.slow
def test_the_benches_finetuning_step_is_the_commands(tmp_path):
  shared_path("vocab", "bert_uncased_vocab.txt")
  rng = np.random.default_rng(0)
  ids = rng.integers(1000, 30522, (4, 16)).astype(np.int32)
  features = {"input_ids": ids, "input_mask": np.ones_like(ids),
              "segment_ids": np.zeros_like(ids),
              "label": rng.integers(0, 2, 4).astype(np.float32)}
  loop, step = finetuning_step("glue/sst2", features, 2, {
      "model_size": "debug", "train_batch_size": 4, "max_seq_length": 16}, str(tmp_path))
  model = loop.train_step.model
  assert isinstance(model, FinetuningModel) and list(model.heads) == ["glue/sst2"]
  assert all(math.isfinite(float(step())) for _ in range(2))
  assert int(loop.train_step.global_step.numpy()) == 2


def test_the_rows_flags_take_lists_of_their_choices_and_refuse_others_in_one_line(
    capsys):
  parser = argparse.ArgumentParser(prog="bench")
  peers.add_arguments(parser)
  args = parser.parse_args([])
  assert (args.peers, args.precisions) == (["eager"], ["float32"])  # the rows of before
  args = parser.parse_args(["--peers", "compiled,eager,compiled",
                            "--precisions", "bfloat16"])
  assert (args.peers, args.precisions) == (["compiled", "eager"], ["bfloat16"])
  for flag, value, choices in (("--peers", "eager,jit", "eager, compiled"),
                               ("--precisions", "float16", "float32, bfloat16")):
    with pytest.raises(SystemExit):
      parser.parse_args([flag, value])
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error == (f"bench: error: argument {flag}: {value.split(',')[-1]!r}: "
                     f"expected a comma-separated list of {choices}")
  # The benches refuse at parse time, before any process starts.
  refused = bench("bench_finetuning", "--precisions", "float32,half")
  assert refused.returncode == 2 and refused.stdout == ""
  assert refused.stderr.strip().splitlines()[-1].endswith(
      "error: argument --precisions: 'half': expected a comma-separated list of "
      "float32, bfloat16")


# Sentences of several lengths (SST-2's layout: a header, then sentence and label): a
# batch's worth and more, as the command needs for a step.
SST2 = ["sentence\tlabel"] + [
    f"{' '.join(['a fine film'] * (1 + i % 7))} , {'not ' * (i % 3)}bad\t{i % 2}"
    for i in range(80)]
CONLL = ["He PRP B-NP", "reckons VBZ B-VP", "the DT B-NP", "current JJ I-NP",
         "account NN I-NP", "deficit NN I-NP", ". . O", "",
         "Confidence NN B-NP", "in IN B-PP", "the DT B-NP", "pound NN I-NP", ". . O", ""]


def same_batches(ours, hf, multiple):
  """Both rows' figures; the same examples: as many real tokens on both sides; the one
  timed batch is the same one, the peer's padded to its longest, ours' cut as a run
  cuts it (to `multiple`, or to max_seq_length with 0)."""
  for row in (ours, hf):
    assert {"examples_per_s", "real_tokens_per_s", "padded_tokens_per_s",
            "mean_batch_length", "real_tokens", "first_step_s"} <= set(row)
  assert ours["real_tokens"] == hf["real_tokens"] > 0
  longest = hf["mean_batch_length"]
  assert ours["real_tokens"] <= 32 * longest < 32 * 128
  assert ours["mean_batch_length"] == (
      -(-longest // multiple) * multiple if multiple else 128)


# SST-2 (the whole command; grouped by length, cut to a multiple of 4, not the config's
# 8: the flag reaches every row); chunking (a tagging head) in a run's random order,
# padded to max_seq_length: each family, order and cut once.
@pytest.mark.slow
def test_bench_finetuning_trains_both_sides_on_the_same_real_batches(tmp_path):
  """The whole run_finetuning.py too (its row timed by its own log), on the batches of
  its timed step: grouped by length, the command's grouped batch is the one the step
  times, and the peer's sampler orders the same examples."""
  shared_path("vocab", "bert_uncased_vocab.txt")
  impls = ["ours", "hf", "ours_command"]
  (tmp_path / "SST-2").mkdir()
  (tmp_path / "SST-2" / "train.tsv").write_text("\n".join(SST2) + "\n")
  assert FinetuningConfig().batch_length_multiple != 4
  run = bench("bench_finetuning", "--task", "sst2", "--glue-dir", str(tmp_path),
              "--length-grouping", "2", "--batch-length-multiple", "4", "--model-size",
              "debug", "--steps", "1", "--warmup", "1", "--rounds", "1", "--impls",
              ",".join(impls), "--threads", "1")
  assert run.returncode == 0, run.stderr[-3000:]
  lines = run.stdout.strip().splitlines()
  assert any(line.startswith("| ours | ") for line in lines)
  assert any(line.startswith("| hf | ") for line in lines)
  rows = json.loads(lines[-1])
  assert list(rows) == impls
  ours, hf = rows["ours"], rows["hf"]
  # The command's second step, timed by its log, on the batch ours and the peer
  # timed: as many real tokens, the same length; its start-up apart.
  command = rows["ours_command"]
  assert command["examples_per_s"] > 0 and command["real_tokens"] == ours["real_tokens"]
  assert command["mean_batch_length"] == ours["mean_batch_length"]
  assert 0 < command["first_step_s"] < command["whole_s"]
  assert command["of_step"] == pytest.approx(
      command["examples_per_s"] / ours["examples_per_s"], rel=0.01)
  assert f"ours_command: {command['of_step']:.3f}x the examples/s of ours's step" in \
      run.stdout
  same_batches(ours, hf, 4)
  assert "grouped by length (ours: length_grouping_batches 2" in run.stdout
  # The warm-up's batch and the timed one, sorted together: the timed one is the
  # longer half of the run's first 64 examples.
  assert ours["mean_batch_length"] > 16


@pytest.mark.slow
def test_bench_finetunings_rows_train_a_tagging_task_on_the_same_batches(tmp_path):
  """Chunking's batches and both rows, by the functions the command's children run
  (the command's process path is the SST-2 test's): the peer's token classifier with
  each word's label at its first piece, ours padded to max_seq_length
  (--batch-length-multiple 0)."""
  shared_path("vocab", "bert_uncased_vocab.txt")
  (tmp_path / "train.txt").write_text("\n".join(CONLL) + "\n")
  batches = str(tmp_path / "batches.npz")
  made = bench_finetuning.task_batches("chunk", str(tmp_path / "train.txt"), 1, batches,
                                       "debug", multiple=0)
  assert made["examples"] == 2
  shared = {"steps": 1, "warmup": bench_finetuning.warmup_steps(1, 1, "chunk"),
            "threads": 1, "clock": "wall", "model_size": "debug", "task": "chunk",
            "batches": batches}
  ours = bench_finetuning.run_impl("ours", **shared, batch_length_multiple=0)
  hf = bench_finetuning.run_impl("hf", **shared, num_labels=made["num_labels"])
  same_batches(ours, hf, 0)


def test_bench_finetunings_bad_flags_and_a_failed_child_are_one_line_each(
    tmp_path, monkeypatch, capsys):
  def refused(*flags):
    monkeypatch.setattr(sys, "argv", ["bench_finetuning", *flags])
    with pytest.raises(SystemExit) as exit_:
      bench_finetuning.main()
    assert exit_.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]
  assert refused("--steps", "0").endswith("error: --steps 0: expected an integer >= 1")
  assert refused("--rounds", "-1").endswith(
      "error: --rounds -1: expected an integer >= 1")
  assert refused("--task", "mrpc", "--glue-dir", str(tmp_path)).endswith(
      f"error: --glue-dir {tmp_path}: no MRPC/train.tsv there (the training file of "
      "mrpc)")
  monkeypatch.setitem(bench_finetuning.DATA_DIRS, "conll_dir", str(tmp_path / "none"))
  assert refused("--task", "chunk").endswith(
      f"error: --conll-dir: not given, and {tmp_path / 'none'} (its default) does not "
      "exist; give the folder holding train.txt")

  # A child that crashed: its row is child.measure's one line (the last line of its
  # traceback and the file holding it), the table goes on and the bench exits 1.
  failure = ("bench.bench_finetuning.run_impl exited 1: RuntimeError: out of luck (its "
             "stderr: /tmp/bench_child_1.log)")

  def crashed(function, kwargs, row, *args):
    if row["impl"] == "hf":
      raise child.ChildFailed(failure)
    return {**row, "unavailable": "not run here"}
  monkeypatch.setattr(peers, "measure", crashed)
  monkeypatch.setattr(sys, "argv", ["bench_finetuning", "--model-size", "debug",
                                    "--impls", "ours,hf,ours_command", "--rounds", "1"])
  assert bench_finetuning.main() == 1
  lines = capsys.readouterr().out.strip().splitlines()
  assert f"| hf | failed: {failure} |" in lines
  assert json.loads(lines[-1])["hf"] == {"unavailable": f"failed: {failure}"}
  # The whole command trains on a task's examples: without --task, its row says so.
  assert "| ours_command | the command trains on a task's examples: give --task |" in lines


def test_a_bfloat16_row_on_a_cpu_without_its_arithmetic_is_one_line_and_no_process(
    monkeypatch):
  monkeypatch.setattr(child, "measure", lambda *a, **k: pytest.fail("started a process"))
  row = {"impl": "hf", "peer": "compiled", "precision": "bfloat16"}
  for flags, isa, gpu in (({"avx2", "fma"}, "native", False),
                          ({"avx512f", "avx512_bf16", "amx_bf16"}, "avx2", False)):
    monkeypatch.setattr(cpu, "cpu_info",
                        lambda f=flags: cpu.CpuInfo("test", frozenset(f), 2500.0))
    result = peers.measure(bench_finetuning.run_impl, {}, row, gpu, isa=isa)
    assert result == {**row, "unavailable": "no bfloat16 arithmetic on this CPU"}
    assert peers.row_line("hf compiled bfloat16", result, "") == (
        "| hf compiled bfloat16 | no bfloat16 arithmetic on this CPU |")
  # Where it can run: this CPU's arithmetic, ours on a GPU, any float32 row.
  monkeypatch.setattr(cpu, "cpu_info", lambda: cpu.CpuInfo(
      "test", frozenset({"avx512f", "amx_bf16"}), 2500.0))
  assert peers.unavailable("bfloat16") is None
  monkeypatch.setattr(cpu, "cpu_info",
                      lambda: cpu.CpuInfo("test", frozenset({"avx2"}), 2500.0))
  assert peers.unavailable("bfloat16", gpu=True) is None
  assert peers.unavailable("float32", "avx2") is None


def test_the_first_step_is_timed_apart_from_the_timed_steps(monkeypatch):
  now, calls = [0.0], []

  def step():  # the first call 10 "seconds" (a compilation), each next one 1
    now[0] += 10.0 if not calls else 1.0
    calls.append(now[0])
    return 0.5
  monkeypatch.setitem(bench_steps.CLOCKS, "fake", lambda: now[0])
  assert bench_steps.time_first_and_steps(step, 3, warmup=2, clock="fake") == (10.0, 3.0)
  assert len(calls) == 5  # 2 untimed (the first among them), 3 timed


def test_a_peer_that_cannot_compile_is_one_line_and_the_table_goes_on(monkeypatch,
                                                                     capsys):
  import torch  # pylint: disable=import-outside-toplevel

  def failing_compile(module):  # as inductor fails at the first call without a compiler
    def call(*args, **kwargs):
      raise torch._dynamo.exc.BackendCompilerFailed(  # pylint: disable=protected-access
          "inductor", RuntimeError("No working C++ compiler found\nmore of the report"),
          None)
    return call
  monkeypatch.setattr(torch, "compile", failing_compile)
  wrap, forward = peers.torch_variant("compiled", "bfloat16")
  model = wrap(torch.nn.Linear(4, 1))
  with forward():  # bfloat16: the peer's forward passes under CPU autocast
    assert torch.is_autocast_enabled("cpu")
    assert torch.get_autocast_dtype("cpu") == torch.bfloat16
  timed = peers.time_peer(lambda: model(torch.ones(2, 4)).sum(), 2, 1, "wall")
  assert list(timed) == ["unavailable"]
  line = timed["unavailable"]
  assert line == "torch.compile failed: RuntimeError: No working C++ compiler found"
  eager = peers.time_peer(
      lambda: torch.nn.Linear(4, 1)(torch.ones(2, 4)).sum().detach(), 2, 1, "wall")
  assert set(eager) == {"first_step_s", "seconds"} and eager["seconds"] > 0

  # The pre-training bench's table: that row one line, the others their figures.
  ran = {"tokens_per_s": 1000, "steps_per_s": 1.0, "first_step_s": 2.0,
         "peak_flops": 4e9, "peak_rss_mib": 900, "isa": "native", "onednn": "1"}
  rows = {"ours": ("ours", None, "float32"), "hf": ("hf", "eager", "float32"),
          "hf compiled": ("hf", "compiled", "float32")}
  results = {"ours": [peers.with_peak_fraction(dict(ran, tokens_per_s=1500), 1e9)],
             # A rate past its peak: the peak is wrong, and said to be unknown.
             "hf": [peers.with_peak_fraction(dict(ran, peak_flops=5e8), 1e9)],
             "hf compiled": [{"peak_rss_mib": 900, "isa": "native", **timed}]}
  bench_pretraining.compare(rows, results, lambda precision: peers.row_label(
      "hf", "eager", precision))
  lines = capsys.readouterr().out.strip().splitlines()
  assert lines[1] == ("| ours | 1,500 tokens/s | 1.50x hf | first step 2.0 s | 25.0% of "
                      "peak | 900 MiB peak RSS |")
  assert lines[2].endswith("| first step 2.0 s | peak unknown | 900 MiB peak RSS |")
  assert lines[3] == f"| hf compiled | {line} |"
  assert json.loads(lines[-1])["hf compiled"] == {"unavailable": line,
                                                  "peak_rss_mib": 900}


@pytest.mark.slow
def test_bench_islands_times_each_island_and_refuses_a_bad_shape_in_one_line(
    monkeypatch, capsys):
  # In this process (the bench measures in its own, no child): it sets TensorFlow's
  # threads for a TensorFlow it imports, here already loaded.
  monkeypatch.setenv("TF_NUM_INTRAOP_THREADS", "1")
  bench_islands.main(["--batch-size", "2", "--seq-length", "8", "--hidden-size", "16",
                      "--heads", "2", "--intermediate-size", "32", "--calls", "1",
                      "--threads", "1"])
  milliseconds = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
  islands = ["q, k, v bias + scale + heads' transpose", "mask + softmax + dropout",
             "bias + dropout + residual + LayerNorm", "bias + GELU"]
  assert list(milliseconds) == islands + ["a layer's islands"]
  assert all(milliseconds[name] > 0 for name in islands)
  assert milliseconds["a layer's islands"] == pytest.approx(
      sum(milliseconds[name] for name in islands)
      + milliseconds["bias + dropout + residual + LayerNorm"], abs=0.15)
  bad = bench("bench_islands", "--hidden-size", "30", "--heads", "4")
  assert bad.returncode == 2 and "--hidden-size 30 is not a multiple of --heads 4" in (
      bad.stderr.strip().splitlines()[-1])


@pytest.mark.slow
def test_bench_update_times_both_updates_on_the_commands_variables():
  """Ours' update on run_finetuning.py's variables, the peer's fused AdamW (with and
  without its clipping) on as many of the same shapes: one row each."""
  run = bench("bench_update", "--model-size", "debug", "--calls", "1", "--rounds", "1")
  assert run.returncode == 0, run.stderr[-3000:]
  lines = run.stdout.strip().splitlines()
  assert [line.split(" |")[0] for line in lines[-4:-1]] == [
      "| ours", "| torch_fused", "| torch_fused_clipped"]
  milliseconds = json.loads(lines[-1])
  assert set(milliseconds) == {"ours", "torch_fused", "torch_fused_clipped"}
  assert all(ms > 0 for ms in milliseconds.values())
