#!/usr/bin/env bash
# Sets up .venv (scripts/setup.sh, then requirements-test.txt) and runs the test suite;
# extra args go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Test-only requirements (transformers and torch for the Hugging Face export tests).
stamp=.venv/.requirements-test.sha256
want=$(sha256sum requirements-test.txt | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "test: installing requirements-test.txt into .venv" >&2
  .venv/bin/python -m pip install --quiet -r requirements-test.txt
  echo "$want" > "$stamp"
fi
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}
# One TensorFlow thread per process: two workers (and the commands they start) share
# the cores; more threads per process only contend.
export TF_NUM_INTRAOP_THREADS=${TF_NUM_INTRAOP_THREADS:-1}
export TF_NUM_INTEROP_THREADS=${TF_NUM_INTEROP_THREADS:-1}
# Likewise NumPy's and SciPy's OpenBLAS (the tests' reference computations): its threads
# spin while they wait for work, which took a quarter of the CPU time of four test files.
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
# Two processes: most of the suite's time is spent starting Python and TensorFlow and in
# single-threaded Python, which two cores do side by side. worksteal: each takes half the
# tests in file order (a module's fixtures are built once) and an idle one takes over
# the other's remaining tests, so one long file no longer keeps a core busy alone.
exec .venv/bin/python -m pytest -n 2 --dist worksteal --durations=15 "$@"
