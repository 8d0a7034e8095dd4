"""util/startup.py, which every command imports first: Ctrl-C while a command starts
ends in one line; TensorFlow's "no GPU" error line (and absl's note before it) is not
printed on a machine without one, and every other line it writes is."""

import os
import signal
import subprocess
import sys
import time

from tests.conftest import ROOT
from util import startup, stderr

QUIET_TF = "import tensorflow as tf; tf.constant(1); print('ran')"


def run_python(code, **env):
  return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                        text=True, timeout=300, env=dict(os.environ, **env))


def test_no_gpu_line_on_a_machine_without_one_other_lines_kept(capfd):
  plain = run_python(QUIET_TF)
  ours = run_python("from util import startup\n" + QUIET_TF)
  assert plain.stdout == ours.stdout == "ran\n"
  if not startup.has_gpu():  # TensorFlow says it on every start here ...
    assert stderr.NO_GPU_LINE in plain.stderr, plain.stderr
  assert stderr.NO_GPU_LINE not in ours.stderr  # ... and the command does not
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


def test_ctrl_c_while_tensorflow_loads_prints_one_line(tmp_path):
  # tools.export_hf imports TensorFlow before its work: Ctrl-C once TensorFlow's
  # library is mapped, while the import goes on for seconds.
  process = subprocess.Popen(
      [sys.executable, "-m", "tools.export_hf", "--checkpoint", str(tmp_path / "none"),
       "--output", str(tmp_path / "hf")], cwd=ROOT, stdout=subprocess.PIPE,
      stderr=subprocess.PIPE, text=True,
      # As from a terminal: a test runner started in the background ignores SIGINT,
      # which its children would inherit.
      preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
  deadline = time.time() + 120
  while "libtensorflow_framework" not in open(f"/proc/{process.pid}/maps").read():
    assert process.poll() is None and time.time() < deadline, process.communicate()
    time.sleep(0.02)
  process.send_signal(signal.SIGINT)
  out, err = process.communicate(timeout=120)
  assert (process.returncode, out, err) == (
      130, "", "interrupted: Ctrl-C (while starting: nothing was done)\n")
  assert not (tmp_path / "hf").exists()
