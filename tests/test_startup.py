"""util/startup.py, which every command imports first: Ctrl-C while a command starts
ends in one line; TensorFlow's "no GPU" error line (and absl's note before it) is not
printed on a machine without one, and every other line it writes is."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

import run_finetuning
from finetune import trainer
from tests.helpers import ROOT, write_reviews_task, write_tiny_pretrained_model
from util import cpu, startup, stderr

QUIET_TF = ("import tensorflow as tf; tf.config.list_physical_devices('GPU'); tf.constant(1); "
            "print('ran')")


def run_python(code, **env):
  return subprocess.run([sys.executable, "-c", code], capture_output=True,
                        text=True, timeout=300, env=dict(os.environ, **env))


@pytest.mark.slow
def test_no_gpu_line_on_a_machine_without_one_other_lines_kept(capfd):
  plain = run_python(QUIET_TF)
  ours = run_python("from util import startup\n" + QUIET_TF)
  assert plain.stdout == ours.stdout == "ran\n"
  # TensorFlow logs the no-GPU line at most starts without a GPU, not all (absent inside
  # the suite on a 2-core Intel Xeon): the filter itself is checked below on the line
  # written to file descriptor 2; here, only that a command says nothing.
  assert stderr.NO_GPU_LINE not in ours.stderr
  assert ours.stderr == ""

  class FakeConfig:  # TensorFlow's C++ logging writes to file descriptor 2
    @staticmethod
    def list_physical_devices(kind):
      assert kind == "GPU"
      os.write(2, b"WARNING: All log messages before absl::InitializeLog() is called are "
                  b"written to STDERR\n"
                  b"E cuda_platform.cc:51] failed call to cuInit: UNKNOWN ERROR (303)\n"
                  b"E gpu_device.cc:1] a real error\nW a warning\n")
      return []

  class FakeTensorFlow:
    config = FakeConfig
  capfd.readouterr()
  startup.probe_devices_quietly(FakeTensorFlow)
  assert capfd.readouterr().err == "E gpu_device.cc:1] a real error\nW a warning\n"


@pytest.mark.parametrize("signum,line", [
    (signal.SIGINT, "interrupted: Ctrl-C (while starting: nothing was done)\n"),
    (signal.SIGTERM, "interrupted: SIGTERM (while starting: nothing was done)\n")])
def test_a_signal_while_tensorflow_loads_prints_one_line(tmp_path, signum, line):
  # tools.export_hf imports TensorFlow before its work: the signal once TensorFlow's
  # library is mapped, while the import goes on for seconds.
  process = subprocess.Popen(
      [sys.executable, "-m", "tools.export_hf", "--checkpoint", str(tmp_path / "none"),
       "--output", str(tmp_path / "hf")], stdout=subprocess.PIPE,
      stderr=subprocess.PIPE, text=True,
      # As from a terminal: a test runner started in the background ignores SIGINT,
      # which its children would inherit.
      preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
  deadline = time.time() + 120
  while "libtensorflow_framework" not in open(f"/proc/{process.pid}/maps").read():
    assert process.poll() is None and time.time() < deadline, process.communicate()
    time.sleep(0.02)
  process.send_signal(signum)
  out, err = process.communicate(timeout=120)
  assert (process.returncode, out, err) == (130, "", line)
  assert not (tmp_path / "hf").exists()


POOL_SCRIPT = """
import multiprocessing, signal
from util import startup
def default(_):
  return signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
if __name__ == "__main__":
  with multiprocessing.get_context("spawn").Pool(2) as pool:
    print(signal.getsignal(signal.SIGTERM) is startup._terminated, pool.map(default, [0, 1]))
"""


def test_a_pools_workers_keep_sigterms_default(tmp_path):
  """The build's pool ends its workers with SIGTERM: a Python handler there, which runs
  only when the main thread wakes, could leave a worker blocked for good."""
  script = tmp_path / "pool.py"
  script.write_text(POOL_SCRIPT)
  ran = subprocess.run([sys.executable, str(script)], capture_output=True,
                       text=True, timeout=300, env=dict(os.environ, PYTHONPATH=ROOT))
  assert (ran.returncode, ran.stdout) == (0, "True [True, True]\n"), ran.stderr


@pytest.mark.slow
def test_sigterm_outside_the_training_loop_is_one_line_and_releases_the_lock(
    tmp_path, capsys, monkeypatch):
  """The serving export runs after training, past its last save: SIGTERM there ends as
  Ctrl-C would, in one line naming that save, the lock released and no half-written
  SavedModel left; the same command then finishes."""
  data = tmp_path / "data"
  data.mkdir()
  write_tiny_pretrained_model(data)
  task = write_reviews_task(tmp_path, 16)
  flags = ["--task", task, "--model-name", "tiny", "--data-dir", str(data), "--hparams",
           json.dumps({"max_seq_length": 16, "train_batch_size": 8, "num_train_epochs": 1,
                       "write_curves": False})]
  export = trainer.serving.export

  def terminated_while_exporting(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGTERM)
    return export(*args, **kwargs)
  monkeypatch.setattr(trainer.serving, "export", terminated_while_exporting)
  assert run_finetuning.main(flags) == 130
  models = data / "models" / "tiny" / "finetuning_models"
  saved = models / "reviews_model_1" / "ckpt-2"
  assert capsys.readouterr().err.splitlines()[-1] == (
      f"interrupted: SIGTERM after step 2 (saved {saved}); run the same command again "
      "to resume")
  assert not (models / ".reviews_model.lock.holder").exists()
  assert not [p for p in (models / "reviews_model_1").iterdir()
              if p.name.startswith(".saved_model")]
  monkeypatch.setattr(trainer.serving, "export", export)
  assert run_finetuning.main(flags) == 0
  assert (models / "reviews_model_1" / "saved_model" / "saved_model.pb").exists()


def test_onednn_on_where_tensorflow_leaves_it_off_and_the_users_setting_kept():
  avx2 = cpu.CpuInfo("test", frozenset({"sse2", "avx2", "fma"}), 2500.0)
  vnni = cpu.CpuInfo("test", avx2.flags | {"avx512f", "avx512_vnni"}, 2500.0)
  arm = cpu.CpuInfo("test", frozenset({"neon", "asimd"}), 2500.0)
  assert cpu.onednn_choice(avx2, {}) == "1"
  assert cpu.onednn_choice(vnni, {}) is None  # TensorFlow turns it on by itself
  assert cpu.onednn_choice(arm, {}) is None
  assert cpu.onednn_choice(avx2, {"TF_ENABLE_ONEDNN_OPTS": "0"}) is None

  show = ("from util import startup; import os; "
          "print(os.environ.get('TF_ENABLE_ONEDNN_OPTS'))")
  env = {k: v for k, v in os.environ.items() if k != "TF_ENABLE_ONEDNN_OPTS"}
  env[cpu.ASSUME_CPU_ENV] = "avx2"
  run = lambda extra: subprocess.run([sys.executable, "-c", show], env={
      **env, **extra}, capture_output=True, text=True, timeout=120)
  assert run({}).stdout == ("1\n" if "sse2" in cpu.cpu_info().flags else "None\n")
  for users in ("0", "1"):
    assert run({"TF_ENABLE_ONEDNN_OPTS": users}).stdout == users + "\n"
  bad = run({cpu.ASSUME_CPU_ENV: "avx9"})
  assert bad.returncode == 2 and bad.stderr == (
      f"error: {cpu.ASSUME_CPU_ENV}=avx9: expected avx2 or nothing\n")


def test_assumed_avx2_cpu_drops_the_newer_flags(monkeypatch):
  monkeypatch.setenv(cpu.ASSUME_CPU_ENV, "avx2")
  info = cpu.cpu_info()
  assert info.assumed == "avx2"
  assert not any(f.startswith(("avx512", "amx")) or f == "avx_vnni" for f in info.flags)
  assert not info.tensorflow_enables_onednn and not info.has_bf16
  monkeypatch.delenv(cpu.ASSUME_CPU_ENV)
  assert cpu.cpu_info().flags >= info.flags


def test_cpu_command_says_who_chose_onednn():
  env = {k: v for k, v in os.environ.items()
         if k not in ("TF_ENABLE_ONEDNN_OPTS", cpu.ASSUME_CPU_ENV)}
  run = lambda extra: json.loads(subprocess.run(
      [sys.executable, "-m", "tools.cpu", "--json"], env={**env, **extra},
      capture_output=True, text=True, timeout=120, check=True).stdout)
  users = run({"TF_ENABLE_ONEDNN_OPTS": "0"})
  assert not users["onednn"] and users["onednn_chosen_by"].startswith("you")
  if "sse2" in cpu.cpu_info().flags:
    avx2 = run({cpu.ASSUME_CPU_ENV: "avx2"})
    assert avx2["onednn"] and avx2["onednn_chosen_by"].startswith("this project")
    assert avx2["assumed"] == "avx2" and not avx2["bf16_hardware"]
    assert "avx512f" not in avx2["flags"]
  native = run({})
  assert native["onednn"] == (cpu.cpu_info().tensorflow_enables_onednn or
                              native["onednn_chosen_by"].startswith("this project"))
