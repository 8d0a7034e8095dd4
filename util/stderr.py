"""Lines TensorFlow's C++ side writes to stderr that read as failures and are not.

No log level reaches them (TensorFlow 2.20 logs through absl, which writes everything to
stderr until a program initializes it), so they are taken out of what the process writes
while the one call that causes them runs; every other line is written back.
"""

import contextlib
import os
import sys
import tempfile
import warnings
from typing import Iterator

# absl's note before a process's first log line: noise when that line is taken out.
ABSL_FIRST_LINE = "All log messages before absl::InitializeLog() is called"
# What TensorFlow logs when it finds no usable GPU driver (error 303 on a machine
# without one); the same call failing beside a GPU is a real error and stays.
NO_GPU_LINE = "failed call to cuInit"
# TensorFlow's line as a multi-worker run starts its gRPC server (training/runtime.py).
GRPC_SERVER_LINE = "Started server with target: grpc://"
# Logged once per process at its first XLA compilation (model/fused.py's islands, in
# the first training step).
FIRST_COMPILE_LINE = "Compiled cluster using XLA!"
# The LiteRT converter's and tf2onnx's notes on every conversion: options it ignores,
# its MLIR pass, the calibrator's settings, grappler's GPU count and session (an
# error still comes as its own line, and as the exception the export reports).
CONVERTER_LINES = ("tf_tfl_flatbuffer_helpers.cc", "MLIR V1 optimization pass is not enabled",
                   "fully_quantize: ", "Number of eligible GPUs", "single_machine.cc",
                   ABSL_FIRST_LINE)


@contextlib.contextmanager
def without_lines(*fragments: str, all_if_raised: bool = False) -> Iterator[None]:
  """Captures file descriptor 2 while the block runs, then writes back the lines that
  contain none of `fragments` (also when the block raises, unless `all_if_raised`:
  then none, for an error whose one line says what they said)."""
  sys.stderr.flush()
  saved = os.dup(2)
  raised = False
  with tempfile.TemporaryFile() as captured:
    os.dup2(captured.fileno(), 2)
    try:
      yield
    except BaseException:
      raised = True
      raise
    finally:
      sys.stderr.flush()
      os.dup2(saved, 2)
      os.close(saved)
      captured.seek(0)
      written = captured.read().decode("utf-8", "replace")
      if not (raised and all_if_raised):
        sys.stderr.write("".join(line for line in written.splitlines(keepends=True)
                                 if not any(f in line for f in fragments)))
      sys.stderr.flush()


@contextlib.contextmanager
def quiet_conversion() -> Iterator[None]:
  """Without CONVERTER_LINES, and without the warning that the QuantizationDebugger's
  own use of tf.lite.Interpreter raises (the project reads LiteRT files with
  ai-edge-litert's)."""
  with without_lines(*CONVERTER_LINES), warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=r"\s*Warning: tf\.lite\.Interpreter is deprecated")
    yield


def python_lines_only() -> None:
  """From now on, only what Python writes (sys.stderr, moved to a copy of the
  descriptor) reaches stderr; what TensorFlow's C++ side writes goes to /dev/null. For a
  process that is ending, whose last line TensorFlow's would otherwise follow."""
  sys.stderr.flush()
  sys.stderr = open(os.dup(2), "w", buffering=1, encoding=sys.stderr.encoding,
                    errors="backslashreplace")
  null = os.open(os.devnull, os.O_WRONLY)
  os.dup2(null, 2)
  os.close(null)
