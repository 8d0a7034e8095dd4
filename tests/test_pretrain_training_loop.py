"""The shared training loop (training/loop.py) on a toy regression model.

A toy model keeps these checks fast; tests/test_pretrain_run.py runs the same loop on
the real pre-training model end to end (MirroredStrategy over two CPUs included).
"""

import json
import os
import signal
import socket
import sys

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from bench.bench_multi_worker import EPHEMERAL_PORTS, loopback_cluster
from runs.checkpoints import RunCheckpoints
from tests.helpers import start_workers, train_toy, wait_for_workers
from training.curves import CURVES_NAME, LOG_NAME, read_log
from training.loop import NonFiniteLossError
from training.stopping import TrainingInterrupted
from training.runtime import make_strategy


def log_losses(model_dir):
  return {s: e["loss"] for s, e in read_log(
      os.path.join(model_dir, LOG_NAME)).items()}


def test_resume_continues_the_same_run_exactly(tmp_path):
  whole, _ = train_toy(str(tmp_path / "a"), 6)
  train_toy(str(tmp_path / "b"), 3)  # stops at 3 (checkpoint at 2 and at the end)
  resumed, loop = train_toy(str(tmp_path / "b"), 6, settings={"plot_curves": True})
  assert int(loop.train_step.global_step.numpy()) == 6
  for a, b in zip(whole, resumed):
    np.testing.assert_array_equal(a, b)  # same data, dropout masks and noise seeds
  assert log_losses(tmp_path / "a") == log_losses(tmp_path / "b")
  assert os.path.getsize(tmp_path / "b" / CURVES_NAME) > 1000  # drawn by the resumed run


def test_sigterm_saves_then_stops_and_rerun_finishes_identically(tmp_path):
  whole, _ = train_toy(str(tmp_path / "a"), 7)
  with pytest.raises(TrainingInterrupted, match="SIGTERM at step") as info:
    train_toy(str(tmp_path / "b"), 7, signal_at_step=2)
  step = int(str(info.value).split("at step ")[1].split(":")[0])
  assert 3 <= step < 7
  assert tf.train.latest_checkpoint(str(tmp_path / "b")).endswith(f"ckpt-{step}")
  resumed, _ = train_toy(str(tmp_path / "b"), 7)
  for a, b in zip(whole, resumed):
    np.testing.assert_array_equal(a, b)


def test_a_sigterm_during_the_last_save_stops_the_run_there(tmp_path, monkeypatch):
  """After the last step's check for a signal, its save: one there once went unheard,
  and the run carried on (to its next epoch, its export)."""
  save = RunCheckpoints.save

  def save_then_signal(checkpoints, step):
    saved = save(checkpoints, step)
    if step == 4:
      os.kill(os.getpid(), signal.SIGTERM)
    return saved
  monkeypatch.setattr(RunCheckpoints, "save", save_then_signal)
  with pytest.raises(TrainingInterrupted) as info:
    train_toy(str(tmp_path), 4)
  assert str(info.value) == (f"SIGTERM at step 4: saved {tmp_path / 'ckpt-4'}; run the "
                             "same command again to resume")


def test_the_precision_note_comes_once_however_often_the_loop_runs(
    tmp_path, monkeypatch, capsys):
  """Fine-tuning runs the loop once per epoch (and trial): the note came with each."""
  from training import loop  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(loop, "_PRINTED_NOTES", set())
  monkeypatch.setattr(loop, "precision_note", lambda: "note: on this CPU ...")
  train_toy(str(tmp_path), 2)
  train_toy(str(tmp_path), 4)  # the loop again, from step 2
  assert capsys.readouterr().out.count("note: on this CPU ...") == 1


def test_nan_loss_stops_and_keeps_the_last_good_checkpoint(tmp_path):
  with pytest.raises(NonFiniteLossError, match="NaN/inf at step 4") as info:
    train_toy(str(tmp_path), 8, nan_from_step=3)
  latest = tf.train.latest_checkpoint(str(tmp_path))
  assert latest.endswith("ckpt-2") and latest in str(info.value)
  reader = tf.train.load_checkpoint(latest)
  for name, dtype in reader.get_variable_to_dtype_map().items():
    if dtype.is_floating:
      assert np.all(np.isfinite(reader.get_tensor(name))), name


def test_gradient_accumulation_matches_the_full_batch(tmp_path):
  full, _ = train_toy(str(tmp_path / "a"), 3, dropout=0.0, noisy=False)
  accumulated, _ = train_toy(str(tmp_path / "b"), 3, accumulation=2, dropout=0.0,
                             noisy=False)
  for a, b in zip(full, accumulated):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


WORKER_SCRIPT = """
import json, sys
from tests.helpers import train_toy
from training.curves import CURVES_NAME, LOG_NAME, read_log
from training.loop import LoopSettings, NonFiniteLossError, TrainLoop
from training.stopping import TrainingInterrupted
from training.runtime import make_strategy, stateless_seed, use_checkpointed_dropout
strategy = make_strategy("multi_worker")
weights, _ = train_toy(sys.argv[1], 3, strategy=strategy, dropout=0.0, noisy=False)
print(json.dumps({"replicas": strategy.num_replicas_in_sync,
                  "weights": [w.tolist() for w in weights]}))
"""


@pytest.mark.slow
def test_multi_worker_on_loopback_matches_one_worker(tmp_path):
  workers = start_workers([sys.executable, "-c", WORKER_SCRIPT, str(tmp_path / "multi")],
                          str(tmp_path / "workers"))
  reference, _ = train_toy(str(tmp_path / "one"), 3, dropout=0.0, noisy=False)
  outputs = wait_for_workers(workers, timeout=120)
  results = [json.loads(out.strip().splitlines()[-1]) for out in outputs]
  for result in results:
    assert result["replicas"] == 2
    for a, b in zip(reference, result["weights"]):
      np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
  # The chief kept the checkpoints and the log; the other worker's copies are gone.
  assert tf.train.latest_checkpoint(str(tmp_path / "multi")).endswith("ckpt-3")
  assert not os.listdir(tmp_path / "multi" / ".worker_tmp")
  assert sorted(log_losses(tmp_path / "multi")) == [1, 2, 3]


def test_a_loopback_cluster_has_distinct_free_ports_outside_the_ephemeral_range():
  with open(EPHEMERAL_PORTS, encoding="ascii") as f:
    low, high = (int(n) for n in f.read().split())
  for _ in range(20):  # each call starts at a random port
    addresses = loopback_cluster(3)["worker"]
    ports = [int(a.split(":")[1]) for a in addresses]
    assert {a.split(":")[0] for a in addresses} == {"127.0.0.1"}
    assert len(set(ports)) == 3 and all(1024 <= p < low or high < p < 65536 for p in ports)
    for port in ports:  # free: each binds now
      with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_unknown_strategy_suggests_the_closest():
  with pytest.raises(ValueError, match="did you mean 'mirrored'"):
    make_strategy("mirored")


def test_cpu_peak_follows_the_flags_clock_and_cores(monkeypatch):
  from util import cpu  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
  for flags, per_cycle, bf16_per_cycle in (({"sse2"}, 8, 8), ({"avx2", "fma"}, 32, 32),
                                           ({"avx2", "fma", "avx512f"}, 64, 64),
                                           ({"avx512f", "avx512_bf16"}, 64, 128)):
    monkeypatch.setattr(cpu, "cpu_info", lambda f=flags: cpu.CpuInfo(
        "test", frozenset(f), 2500.0, mhz_is_max=True))
    assert cpu.cpu_peak_flops() == 2 * 2500e6 * per_cycle
    assert cpu.cpu_peak_flops("mixed_bfloat16") == 2 * 2500e6 * bf16_per_cycle
    # Of fewer cores when asked (a bench's threads), never of more than it may use.
    assert cpu.cpu_peak_flops(cores=1) == 2500e6 * per_cycle
    assert cpu.cpu_peak_flops(cores=4) == 2 * 2500e6 * per_cycle
  monkeypatch.undo()
  info = cpu.cpu_info()
  assert info.mhz > 0 and ("fma" in info.flags or "avx512f" in info.flags or
                           "sse2" in info.flags)


def test_no_fraction_of_peak_above_100_percent(tmp_path, monkeypatch, capsys):
  """A virtual machine's /proc/cpuinfo states a nominal clock, below what its cores
  reach, and no cpufreq maximum: a peak reckoned from it made fine-tuning print "of peak
  104%". Such a peak is unknown, and a rate past any peak says the peak is wrong."""
  from util import cpu  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
  cpuinfo = tmp_path / "cpuinfo"
  cpuinfo.write_text("processor\t: 0\nmodel name\t: AMD EPYC 7B12\ncpu MHz\t\t: "
                     "2596.000\nflags\t\t: sse2 avx2 fma\n")
  monkeypatch.setattr(cpu, "CPUINFO", str(cpuinfo))
  monkeypatch.setattr(cpu, "MAX_FREQ", str(tmp_path / "no_cpufreq"))
  info = cpu.cpu_info()
  assert (info.mhz, info.mhz_is_max) == (2596.0, False)
  assert cpu.cpu_peak_flops() == 0
  (tmp_path / "max_freq").write_text("3300000\n")  # kHz
  monkeypatch.setattr(cpu, "MAX_FREQ", str(tmp_path / "max_freq"))
  assert cpu.cpu_peak_flops() == 2 * 3300e6 * 32
  # The loop (step 2: rates start after the first): a rate within the peak is a
  # fraction of it, one past it none, in the progress line and the log.
  for peak_flops, shown in ((1e15, "| of peak 0% |"), (1.0, "| peak unknown |")):
    model_dir = tmp_path / f"peak_{peak_flops:g}"
    train_toy(str(model_dir), 2, settings={"flops_per_step": 1e6,
                                           "peak_flops": peak_flops})
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("step 2/2 ") and shown in last, last
    logged = read_log(os.path.join(model_dir, LOG_NAME))[2]
    assert ("peak_fraction" in logged) == (peak_flops > 1)


def test_precision_note_says_which_precision_pays_on_this_cpu(monkeypatch):
  from training import runtime  # pylint: disable=g-import-not-at-top
  from util import cpu  # pylint: disable=g-import-not-at-top
  for flags, expected in (({"avx2", "avx512f", "avx512_bf16"}, True), ({"avx2"}, False),
                          ({"amx_bf16", "amx_tile"}, True)):
    monkeypatch.setattr(cpu, "cpu_info",
                        lambda f=flags: cpu.CpuInfo("test", frozenset(f), 2500.0))
    note = runtime.precision_note()
    assert (note is not None) == expected, flags
    if note:
      assert note.startswith("note: ") and '"mixed_bfloat16"' in note
  try:
    tf_keras.mixed_precision.set_global_policy("mixed_bfloat16")
    assert runtime.precision_note() is None  # on a CPU with bfloat16 arithmetic
    # 16-bit arithmetic a CPU does not have is emulated, many times slower: said.
    monkeypatch.setattr(cpu, "cpu_info",
                        lambda: cpu.CpuInfo("test", frozenset({"avx2"}), 2500.0))
    assert runtime.precision_note().startswith(
        'note: "mixed_precision": "mixed_bfloat16" on a CPU without bfloat16 arithmetic')
    tf_keras.mixed_precision.set_global_policy("mixed_float16")
    assert runtime.precision_note() == (
        'note: "mixed_precision": "mixed_float16" on a CPU: CPUs have no float16 '
        "arithmetic, so TensorFlow emulates it, many times slower than float32 (float16 "
        "is for GPUs); drop mixed_precision here")
  finally:
    tf_keras.mixed_precision.set_global_policy("float32")
