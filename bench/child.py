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
import subprocess
import sys

from util import startup  # pylint: disable=unused-import  # first: TensorFlow's environment

from bench import ROOT  # pylint: disable=wrong-import-position


class ChildFailed(RuntimeError):
  """The child exited with an error; the message ends with the end of its stderr."""


def measure(function, kwargs: dict, threads: int = 0) -> dict:
  """function(**kwargs)'s dict, computed in a new process, with its peak RSS in MiB.
  `threads`: TensorFlow's intra-op threads (and one inter-op thread); 0, its default."""
  module = function.__module__
  if module == "__main__":  # a bench run as `python -m bench.<name>`
    module = sys.modules["__main__"].__spec__.name
  env = dict(os.environ)
  if threads:
    env.update(TF_NUM_INTRAOP_THREADS=str(threads), TF_NUM_INTEROP_THREADS="1")
  run = subprocess.run(
      [sys.executable, "-m", "bench.child", json.dumps([module, function.__name__, kwargs])],
      cwd=ROOT, env=env, capture_output=True, text=True, check=False)
  lines = run.stdout.strip().splitlines()
  if run.returncode or not lines:
    raise ChildFailed(f"{module}.{function.__name__} exited {run.returncode}: "
                      f"{run.stderr.strip()[-300:]}")
  return json.loads(lines[-1])


def main():
  module, name, kwargs = json.loads(sys.argv[1])
  result = getattr(importlib.import_module(module), name)(**kwargs)
  peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
  print(json.dumps({**result, "peak_rss_mib": round(peak)}))


if __name__ == "__main__":
  main()
