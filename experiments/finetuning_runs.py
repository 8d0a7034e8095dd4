"""Several run_finetuning.py runs in one process: TensorFlow starts once for all of them.

  python -m experiments.finetuning_runs '[{"argv": [...], "results": PATH}, ...]'

A study's unit (experiments.compute_efficiency: one arm's encoders on one task, at every
rate of its grid) is many short runs; as processes of their own each would load
TensorFlow again (~6-9 CPU-s, more than a short run's training). The runs go in the
given order, each as run_finetuning.py's main(argv); one whose results file exists is
skipped, so a unit cut short resumes where it stopped. A run that fails (its error
line, or a bug's traceback) does not stop the others; Ctrl-C (or SIGTERM) stops the
unit once the running run has saved. Exit status: 0, 1 if a run failed, 130 if
interrupted.
"""

import json
import os
import sys
import traceback

from util import startup  # pylint: disable=unused-import  # first: TensorFlow's environment

import run_finetuning  # pylint: disable=wrong-import-position
from util import cli  # pylint: disable=wrong-import-position


def run_all(runs: list) -> int:
  failed = False
  for number, run in enumerate(runs, 1):
    if os.path.exists(run["results"]):
      print(f"run {number}/{len(runs)}: skipped, {run['results']} exists", flush=True)
      continue
    print(f"run {number}/{len(runs)}: run_finetuning.py {' '.join(run['argv'])}",
          flush=True)
    try:
      code = run_finetuning.main(run["argv"])
    except SystemExit as e:  # a refused flag
      code = e.code
    except Exception:  # pylint: disable=broad-except  # a bug: its traceback, then the rest
      traceback.print_exc()
      code = 1
    sys.stdout.flush()
    if code == cli.EXIT_INTERRUPTED:
      return code
    failed = failed or bool(code)
  return int(failed)


def main(argv=None) -> int:
  # Ctrl-C between runs, and a malformed list, end in one line too.
  return cli.run_command(lambda: run_all(json.loads((argv or sys.argv[1:])[0])))


if __name__ == "__main__":
  sys.exit(main())
