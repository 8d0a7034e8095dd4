"""A fine-tuning run's dev scores per epoch survive its interruption and its re-runs:
an epoch is scored once, with its own weights, and its first scores stay in the
results' history."""

import json
import os
import re
import signal
import subprocess
import sys

import pytest
import tensorflow as tf

from finetune import config as finetune_config
from finetune import trainer
from tests.helpers import chunk_data, ROOT

# 6 steps an epoch (48 sentences, batch 8), a checkpoint every 2; the learning rate
# moves the F1 from epoch to epoch (else a score taken again could not be told apart).
HPARAMS = {"train_batch_size": 8, "eval_batch_size": 20, "max_seq_length": 64,
           "num_train_epochs": 3, "learning_rate": 2e-3, "save_checkpoints_steps": 2,
           "log_every_steps": 1, "export_serving": False, "write_curves": False}
STEPS_PER_EPOCH = 6


def f1_history(config):
  """[(epoch, step, F1)] of the run's results."""
  with open(config.results_file("json"), encoding="utf-8") as f:
    history = json.load(f)["trials"][0]["history"]
  return [(h["epoch"], h["step"], h["chunk test f1"]) for h in history]


@pytest.mark.slow
def test_a_killed_run_resumed_keeps_each_epochs_first_scores(tmp_path, capsys):
  import run_finetuning  # pylint: disable=g-import-not-at-top
  data = chunk_data(tmp_path, 48, 20)
  flags = ["--task", "chunk", "--model-name", "tiny", "--data-dir", str(data),
           "--hparams", json.dumps(HPARAMS)]
  config = finetune_config.load_config("tiny", ["chunk"], str(data), HPARAMS)
  # Killed for real (SIGKILL: nothing saved at the kill) a few steps into epoch 3,
  # after epoch 2 was scored and a checkpoint past it was saved (one every 2 steps).
  script = os.path.join(ROOT, "run_finetuning.py")
  # Its progress lines go to stderr.
  run = subprocess.Popen([sys.executable, script, *flags], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
  logged, kill_after, output = {}, f"trial 1 step {2 * STEPS_PER_EPOCH + 3}/", []
  try:
    for line in run.stdout:
      output.append(line)
      scored = re.match(r"trial 1 epoch (\d+): chunk test: f1 ([\d.]+)", line)
      if scored:
        logged[int(scored.group(1))] = float(scored.group(2))
      if line.startswith(kill_after):
        run.send_signal(signal.SIGKILL)
        break
  finally:
    run.kill()
    run.wait()
    run.stdout.close()
  assert sorted(logged) == [1, 2], "".join(output[-20:])
  trial_dir = f"{config.model_dir}_1"
  restored = int(tf.train.latest_checkpoint(trial_dir).rsplit("-", 1)[1])
  assert restored > 2 * STEPS_PER_EPOCH
  # The same command again: epochs 1 and 2 keep the scores they were logged with (not
  # the restored checkpoint's), the others are scored as they are reached.
  assert run_finetuning.main(flags) == 0, capsys.readouterr().err
  history = f1_history(config)
  assert [(epoch, step) for epoch, step, _ in history] == [
      (e, e * STEPS_PER_EPOCH) for e in range(1, 4)]
  assert {epoch: round(f1, 2) for epoch, _, f1 in history[:2]} == logged
  # Kept as they were taken, beside the checkpoints.
  with open(os.path.join(trial_dir, trainer.EPOCH_SCORES), encoding="utf-8") as f:
    kept = json.load(f)
  assert [(e["epoch"], e["step"], e["scores"]["chunk test"]["f1"])
          for e in kept] == history

  # A rerun of the finished run changes nothing in its history.
  results = [open(config.results_file(kind), encoding="utf-8").read()
             for kind in ("json", "txt")]
  assert len({f1 for _, _, f1 in history}) > 1, history  # else it would prove nothing
  logs = []
  again = trainer.run(config, log=logs.append)
  assert [open(config.results_file(kind), encoding="utf-8").read()
          for kind in ("json", "txt")] == results
  assert json.loads(json.dumps(again["trials"])) == json.loads(results[0])["trials"]
  # Nothing was scored again: every epoch's scores are the kept ones.
  assert [line for line in logs if " epoch " in line and "(kept" not in line] == []
