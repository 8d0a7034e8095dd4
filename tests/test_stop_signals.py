"""A stop request (SIGTERM, SIGINT) to a run is never lost, whatever the run is doing:
it ends in one `interrupted:` line naming the checkpoint that holds all it trained
(saved then, or already), exits 130 and trains nothing past it
(training/stopping.py)."""

import concurrent.futures
import json
import os
import re
import shutil
import signal
import subprocess
import sys

import pytest
import tensorflow as tf

from tests.helpers import ROOT, head_of, shared_path
from training.curves import LOG_NAME, read_log

# A debug model (random weights) on 100 SST-2 sentences: 3 steps an epoch (batch 32),
# each logged, an epoch's last saved.
HPARAMS = {"debug": True, "max_seq_length": 16, "num_train_epochs": 2,
           "save_checkpoints_steps": 4, "log_every_steps": 1}
# Where each run is stopped: the line after which the test sends the signal, and the
# run's epochs.
STOPS = {
    "mid_epoch": ("trial 1 step 2/3 ", signal.SIGTERM, 2),
    # After an epoch's last step: its save, the curves, the loop's end, the evaluation,
    # the next epoch's start (a signal there once went unheard, and the run trained on
    # to its end).
    "epoch_end": ("trial 1 step 3/3 ", signal.SIGTERM, 2),
    # The last epoch scored: the serving SavedModel is being written.
    "export": ("trial 1 epoch 1: ", signal.SIGINT, 1),
}
STOPPED = re.compile(r"interrupted: (SIG\w+) (?:at step (\d+): saved (\S+); |"
                     r"after step (\d+) \(saved (\S+)\); )run the same command again "
                     r"to resume")


def files_in(*folders):
  """{path: (size, modification time)} of every file under `folders`."""
  return {os.path.join(root, name): (os.path.getsize(os.path.join(root, name)),
                                     os.path.getmtime(os.path.join(root, name)))
          for folder in folders for root, _, names in os.walk(folder) for name in names}


def stopped_run(data, name, after, signum, epochs):
  """(exit status, every line) of run_finetuning.py on `data` as model `name`, sent
  `signum` as soon as it prints a line starting with `after`."""
  run = subprocess.Popen(
      [sys.executable, os.path.join(ROOT, "run_finetuning.py"), "--task", "glue/sst2",
       "--data-dir", str(data), "--model-name", name, "--hparams",
       json.dumps({**HPARAMS, "num_train_epochs": epochs})],
      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
      env=dict(os.environ, PYTHONUNBUFFERED="1"))
  lines = []
  try:
    for line in run.stdout:
      lines.append(line.rstrip("\n"))
      if line.startswith(after):
        run.send_signal(signum)
    return run.wait(timeout=300), lines
  finally:
    run.kill()
    run.wait()
    run.stdout.close()


@pytest.mark.slow
def test_a_stop_request_anywhere_in_a_finetuning_run_ends_it_saved_in_one_line(
    tmp_path):
  data = tmp_path / "data"
  for split, rows in (("train", 100), ("dev", 40)):
    head_of(shared_path("glue", "SST-2", f"{split}.tsv"),
            data / "finetuning_data" / "SST-2" / f"{split}.tsv", rows + 1)
  shutil.copyfile(shared_path("vocab", "bert_uncased_vocab.txt"), data / "vocab.txt")
  before = files_in(tmp_path, os.getcwd())
  # The three runs at once, each its own model (their folders apart).
  with concurrent.futures.ThreadPoolExecutor(len(STOPS)) as pool:
    ended = dict(zip(STOPS, pool.map(lambda item: stopped_run(data, item[0], *item[1]),
                                     STOPS.items())))
  for name, (after, signum, _) in STOPS.items():
    code, lines = ended[name]
    output = "\n".join(lines[-15:])
    # The one line, last; nothing after it (TensorFlow's warnings once followed).
    stopped = STOPPED.fullmatch(lines[-1])
    assert code == 130 and stopped, (name, code, output)
    assert [l for l in lines if l.startswith("interrupted:")] == [lines[-1]], output
    assert stopped[1] == signum.name and any(l.startswith(after) for l in lines), output
    step, saved = int(stopped[2] or stopped[4]), stopped[3] or stopped[5]
    # The checkpoint it names is the run's last, at the last step trained and logged.
    trial_dir = data / "models" / name / "finetuning_models" / "glue_sst2_model_1"
    assert saved == str(trial_dir / f"ckpt-{step}"), output
    assert tf.train.latest_checkpoint(str(trial_dir)) == saved
    assert max(read_log(str(trial_dir / LOG_NAME))) == step
    # Not finished: no results, no SavedModel, nor a half-written one.
    assert not (data / "models" / name / "results").exists(), name
    assert not [p for p in os.listdir(trial_dir) if "saved_model" in p], name
  # Nothing outside the runs' own folders changed (the data, the working folder).
  own = tuple(str(data / "models" / name) + os.sep for name in STOPS)
  assert {path: stat for path, stat in files_in(tmp_path, os.getcwd()).items()
          if not path.startswith(own)} == before


def test_after_a_coordinated_stop_only_pythons_lines_reach_stderr():
  """A multi-worker run's workers may outlive its chief, and with it the cluster's
  coordination service: TensorFlow's C++ lines about its lost heartbeats (written to the
  descriptor) then no longer follow the stop's line, which Python writes."""
  code = ("import os, sys\nfrom util import stderr\nprint('before', file=sys.stderr)\n"
          "stderr.python_lines_only()\nos.write(2, b'E heartbeat failed\\n')\n"
          "print('interrupted: ...', file=sys.stderr)\n")
  ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60, cwd=ROOT)
  assert (ran.returncode, ran.stderr) == (0, "before\ninterrupted: ...\n")


def test_a_stop_after_the_run_deleted_its_last_save_names_none():
  """With keep_all_models false a finished trial's model is deleted: a stop between
  trials then names no checkpoint (there is none to resume from)."""
  from training import stopping  # pylint: disable=g-import-not-at-top
  from util import cli  # pylint: disable=g-import-not-at-top
  lines = {}
  for deleted in (False, True):
    try:
      with stopping.held():
        stopping.StopRequests(None, 0, 1).saved(3, "trial_1/ckpt-3")
        if deleted:
          stopping.save_deleted()
        os.kill(os.getpid(), signal.SIGTERM)
    except cli.Terminated as e:
      lines[deleted] = str(e)
  assert lines == {False: "SIGTERM after step 3 (saved trial_1/ckpt-3); run the same "
                          "command again to resume", True: "SIGTERM"}
