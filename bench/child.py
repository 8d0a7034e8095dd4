"""Runs a bench's function in a fresh process and reads that process's peak memory.

Peak RSS (getrusage) is per process and never falls, so each measured configuration
runs alone in one: `measure(function, kwargs)` starts `python -m bench.child`, which
calls the function (a module-level function of a bench module, its keyword arguments
and its dict result JSON) and prints the result with "peak_rss_mib" added.
"""

import importlib
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile

from util import startup  # pylint: disable=unused-import  # first: TensorFlow's environment

from bench import ROOT  # pylint: disable=wrong-import-position
from util import cli, cpu  # pylint: disable=wrong-import-position

# --isa avx2: an AVX2-only CPU emulated on a newer one. Both frameworks' oneDNN kernels
# (and the peer's MKL) are capped at AVX2, and the start-up reads the CPU as AVX2-only,
# so ours chooses its oneDNN setting as it would on such a machine (util/cpu.py).
ISA_ENV = {"native": {},
           "avx2": {"ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
                    cpu.ASSUME_CPU_ENV: "avx2"}}
# --onednn: TensorFlow's oneDNN kernels as the start-up chooses them (auto), or forced.
ONEDNN_ENV = {"auto": None, "on": "1", "off": "0"}


def add_arguments(parser):
  """The flags every measuring bench takes for the CPU it emulates and oneDNN."""
  parser.add_argument("--isa", choices=sorted(ISA_ENV), default="native",
                      help="avx2: measure as on an AVX2-only CPU (emulated: kernels "
                      "capped at AVX2, the CPU read as AVX2-only)")
  parser.add_argument("--onednn", choices=sorted(ONEDNN_ENV), default="auto",
                      help="TensorFlow's oneDNN kernels: as the commands choose them "
                      "(auto), or on / off")


class ChildFailed(ValueError):
  """The child exited with an error; the message is one line: how it ended, the last
  line of its stderr (a traceback's exception) and the file that holds all of it. A
  ValueError: a bench shows it as one line of its own (cli.run_command), never the
  child's traceback."""

  @property
  def line(self) -> str:
    """The message's first line, for a table's row."""
    return cli.first_line(self)


class ChildError(ChildFailed):
  """The child refused its input in one line (util/cli.py's): that line is the message,
  which a command shows as its own."""


def failed(what: str, returncode: int, stderr: str) -> ChildFailed:
  """The failure of child process `what`, which ended with `returncode` and `stderr`."""
  last = (stderr.strip().splitlines() or [""])[-1]
  if returncode == cli.EXIT_ERROR and last.startswith("error: "):
    return ChildError(last[len("error: "):])
  with tempfile.NamedTemporaryFile("w", prefix="bench_child_", suffix=".log",
                                   delete=False) as log:
    log.write(stderr)
  ended = (f"was killed by {signal.Signals(-returncode).name}" if returncode < 0
           else f"exited {returncode}")
  return ChildFailed(f"{what} {ended}: {last or 'no output'} (its stderr: {log.name})")


def measure(function, kwargs: dict, threads: int = 0, isa: str = "native",
            onednn: str = "auto") -> dict:
  """function(**kwargs)'s dict, computed in a new process, with its peak RSS in MiB.
  `threads`: TensorFlow's intra-op and inter-op threads (as the commands get on a CPU of
  that many cores: they keep TensorFlow's defaults, which overlap independent ops, 8-15%
  faster steps than one inter-op thread on 2 cores, bench/RESULTS.md); 0, its default.
  `isa` and `onednn` as add_arguments' flags say."""
  module = function.__module__
  if module == "__main__":  # a bench run as `python -m bench.<name>`
    module = sys.modules["__main__"].__spec__.name
  env = {k: v for k, v in os.environ.items() if k not in ISA_ENV["avx2"]}
  env.update(ISA_ENV[isa])
  if ONEDNN_ENV[onednn] is not None:
    env[cpu.ONEDNN_ENV] = ONEDNN_ENV[onednn]
  if threads:
    env.update(TF_NUM_INTRAOP_THREADS=str(threads), TF_NUM_INTEROP_THREADS=str(threads))
  run = subprocess.run(
      [sys.executable, "-m", "bench.child", json.dumps([module, function.__name__, kwargs])],
      cwd=ROOT, env=env, capture_output=True, text=True, check=False)
  lines = run.stdout.strip().splitlines()
  if run.returncode or not lines:
    raise failed(f"{module}.{function.__name__}", run.returncode, run.stderr)
  return json.loads(lines[-1])


def main() -> int:
  module, name, kwargs = json.loads(sys.argv[1])

  def call() -> int:
    # An expected failure is one line (its parent shows it as its own); a bug keeps its
    # traceback.
    result = getattr(importlib.import_module(module), name)(**kwargs)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    # A function that measured another process gives that one's peak.
    print(json.dumps({"peak_rss_mib": round(peak), **result,
                      "isa": os.environ.get(cpu.ASSUME_CPU_ENV) or "native",
                      "onednn": os.environ.get(cpu.ONEDNN_ENV, "tensorflow's default")}))
    return 0
  return cli.run_command(call)


if __name__ == "__main__":
  sys.exit(main())
