"""Missing task data is fetched with TensorFlow Datasets; offline, one line says where
the files go; no pre-trained model, one line says how to get one.

No network is used: TFDS's own mock (tfds.testing.mock_data) stands in for the download
and the prepared records, and a refused connection stands in for being offline.
"""

import json
import os
import re
import shutil
import socket
import subprocess
import sys

import pytest
import tensorflow_datasets as tfds

from finetune import config as finetune_config
from finetune import tfds_source, trainer
from tests.helpers import ROOT, shared_path
from util import cli


def debug_config(data, task, **overrides):
  os.makedirs(data, exist_ok=True)
  shutil.copyfile(shared_path("vocab", "bert_uncased_vocab.txt"), data / "vocab.txt")
  return finetune_config.load_config("electra_small", [task], str(data), {
      "debug": True, "max_seq_length": 16, "tfds_data_dir": str(data / "tfds"),
      **overrides})


def test_missing_glue_task_is_fetched_and_read_from_tfds(tmp_path, monkeypatch, capsys):
  config = debug_config(tmp_path / "data", "glue/mrpc")
  probed = []
  monkeypatch.setattr(tfds_source, "unreachable_hosts",
                      lambda builder: probed.append(builder.name) or [])
  with tfds.testing.mock_data(num_examples=24):
    finetuner = trainer.Finetuner(config, log=lambda *_: None)
    train = finetuner.split(0, "train")
    dev = finetuner.split(0, "dev")
  assert probed == ["glue", "glue"]  # each split: not prepared (a mock), so fetched
  out = capsys.readouterr().out
  # Once per split, as the mock never leaves it prepared; the mock reads TFDS's own test
  # metadata, not tfds_data_dir.
  assert re.fullmatch(r"(preparing glue/mrpc with TensorFlow Datasets into \S+/glue/mrpc/"
                      r"[\d.]+ \(a download, once\)\n){2}", out), out
  # MRPC trains on both sentence orders: 24 records read, 48 examples.
  assert len(train.examples) == 48 and len(dev.examples) == 24
  assert {e.label for e in train.examples} <= {"0", "1"}
  assert all(e.text_b is not None for e in dev.examples)
  assert train.features["input_ids"].shape == (48, 16)


def test_offline_fetch_says_what_it_tried_and_where_the_files_go(tmp_path, monkeypatch,
                                                                  capsys):
  config = debug_config(tmp_path / "data", "glue/sst2")

  def offline(*args, **kwargs):
    raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
  monkeypatch.setattr(socket, "create_connection", offline)
  status = cli.run_command(lambda: trainer.run(config, log=lambda *_: None))
  err = capsys.readouterr().err
  assert status == 2 and err.count("\n") == 1, err
  data = tmp_path / "data"
  assert err.startswith(f"error: {data}/finetuning_data/sst/train.tsv: missing train "
                        "file of glue/sst2; expected ")
  assert f"{data}/finetuning_data/SST-2/train.tsv" in err and "GLUE TSV layout" in err
  assert re.search(rf"fetching glue/sst2 with TensorFlow Datasets into {data}/tfds/glue/"
                   r"sst2/[\d.]+ failed: cannot reach [^;]*dl\.fbaipublicfiles\.com[^;]* "
                   r"\(offline\?\)$", err.strip()), err


@pytest.mark.slow
def test_offline_fetch_through_the_script_prints_only_its_error_line(tmp_path):
  data = tmp_path / "data"
  data.mkdir()
  shutil.copyfile(shared_path("vocab", "bert_uncased_vocab.txt"), data / "vocab.txt")
  # Offline: every connection refused, in the script's own process.
  code = ("import socket, sys\n"
          "def offline(*args, **kwargs):\n"
          "  raise socket.gaierror(socket.EAI_NONAME, 'Name or service not known')\n"
          "socket.create_connection = offline\n"
          "import run_finetuning\n"
          "sys.exit(run_finetuning.main(sys.argv[1:]))\n")
  run = subprocess.run(
      [sys.executable, "-c", code, "--task", "glue/sst2", "--data-dir", str(data),
       "--hparams", json.dumps({"debug": True, "tfds_data_dir": str(data / "tfds")})],
      capture_output=True, text=True,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
  # No absl WARNING lines (TFDS's "no dataset_info.json") before the one clear line.
  assert run.returncode == 2 and run.stderr.count("\n") == 1, run.stderr
  assert run.stderr.startswith("error: ") and "(offline?)" in run.stderr


@pytest.mark.slow
def test_no_pretrained_model_says_how_to_get_one(tmp_path):
  run = subprocess.run([sys.executable, os.path.join(ROOT, "run_finetuning.py"), "--task",
                        "glue/mnli", "--data-dir", str(tmp_path)], capture_output=True,
                       text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
  assert run.returncode == 2 and run.stderr.count("\n") == 1, run.stderr
  assert run.stderr.startswith(f"error: no pre-trained model: {tmp_path}/models/"
                               "electra_small holds no checkpoint and no vocab.txt; ")
  assert f"python run_pretraining.py --model-name electra_small --data-dir {tmp_path}" \
      in run.stderr
  # Only flags that exist: those of run_pretraining.py, build_pretraining_dataset.py
  # and run_finetuning.py named here.
  assert set(re.findall(r"--[a-z-]+", run.stderr)) == {
      "--model-name", "--data-dir", "--init-checkpoint", "--hparams"}
