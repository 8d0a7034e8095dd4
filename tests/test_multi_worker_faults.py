"""Faults of a multi-worker run (run_pretraining.py, two workers on 127.0.0.1): a signal
to one worker stops both at one step, saved, and the re-run resumes there; a killed
worker ends the survivor in one line; a cluster that never forms, workers started with
different settings and a task index outside TF_CONFIG's cluster each end in one line;
TF_CONFIG left unused is one warning."""

import json
import os
import re
import signal
import sys
import time

import pytest
import tensorflow as tf

import run_pretraining
from bench.bench_multi_worker import loopback_cluster
from tests.helpers import (ROOT, TINY_MODEL, make_data_dir, start_workers, wait_for_exit,
                           wait_for_workers)
from training.curves import LOG_NAME, read_log

SEQ = 64  # test_pretrain_run.py's: the fused layers' compiled islands serve both
# One thread each: the two workers share the machine's cores. TensorFlow's log level
# left to the commands, to see what a user sees.
ENV = {**{k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"},
       "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1"}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
  return make_data_dir(tmp_path_factory.mktemp("pretrain_data"), SEQ, num_lines=600)[0]


def command(data_dir, model_dir, **hparams):
  return [sys.executable, os.path.join(ROOT, "run_pretraining.py"), "--model-name", "mw",
          "--data-dir", data_dir, "--hparams", json.dumps(
              {"debug": True, "max_seq_length": SEQ, "train_batch_size": 8,
               "num_train_steps": 100000, "log_every_steps": 1, "do_eval": False,
               "distribution_strategy": "multi_worker", "model_dir": str(model_dir),
               **TINY_MODEL, **hparams})]


def wait_for_step(model_dir, step, workers, timeout=120):
  """Waits until the chief has logged `step`; fails (killing the workers) if one ends
  first or it takes over `timeout` seconds."""
  deadline = time.monotonic() + timeout
  log = os.path.join(model_dir, LOG_NAME)
  while not (os.path.exists(log) and max(read_log(log), default=0) >= step):
    if time.monotonic() > deadline or any(p.poll() is not None for p, _, _ in workers):
      ended = [(code, err[-2000:]) for code, _, err in wait_for_exit(workers, 10)]
      pytest.fail(f"no step {step} logged: {ended}")
    time.sleep(0.1)


@pytest.mark.slow
def test_a_sigterm_to_the_other_worker_stops_both_at_one_step_and_resumes_there(
    data_dir, tmp_path):
  model_dir = tmp_path / "run"
  workers = start_workers(command(data_dir, model_dir), str(tmp_path / "first"), env=ENV)
  wait_for_step(model_dir, 2, workers)
  workers[1][0].send_signal(signal.SIGTERM)
  ended = wait_for_exit(workers, 60)
  lines = [err.strip().splitlines()[-1] for _, _, err in ended]
  stopped = re.fullmatch(r"interrupted: SIGTERM on worker 1 at step (\d+): .*", lines[0])
  assert stopped, lines
  step = int(stopped[1])
  saved = os.path.join(model_dir, f"ckpt-{step}")
  # Both stopped at that step, and both say where the chief saved it.
  assert [code for code, _, _ in ended] == [130, 130]
  assert lines == [f"interrupted: SIGTERM on worker 1 at step {step}: every worker "
                   f"stopped there and the chief saved {saved}; run the same commands on "
                   "every worker again to resume"] * 2
  assert tf.train.latest_checkpoint(str(model_dir)) == saved
  reader = tf.train.load_checkpoint(saved)
  assert reader.get_tensor("step/.ATTRIBUTES/VARIABLE_VALUE") == step
  for worker in (0, 1):  # each worker's input position, at the same step
    assert os.path.exists(model_dir / "data_state" / f"worker_{worker}" /
                          f"ckpt-{step}.index")
  assert not os.listdir(model_dir / ".worker_tmp")  # the other worker's scratch copies

  # The same commands again resume exactly there.
  workers = start_workers(command(data_dir, model_dir, num_train_steps=step + 2),
                          str(tmp_path / "again"), env=ENV)
  chief_output = wait_for_workers(workers, 120)[0]
  assert f"resuming from {saved} at step {step}/{step + 2}" in chief_output
  assert sorted(read_log(os.path.join(model_dir, LOG_NAME)))[-3:] == [step, step + 1,
                                                                     step + 2]
  # The chief alone wrote the last checkpoint, the log and the export; the other
  # worker's scratch copies are gone.
  assert tf.train.latest_checkpoint(str(model_dir)).endswith(f"ckpt-{step + 2}")
  assert not os.listdir(model_dir / ".worker_tmp")
  assert os.listdir(model_dir / "export")


@pytest.mark.slow
def test_a_killed_worker_ends_the_other_in_one_line_within_the_bound(data_dir, tmp_path):
  model_dir = tmp_path / "run"
  cluster = loopback_cluster(2)
  workers = start_workers(command(data_dir, model_dir, save_checkpoints_steps=2),
                          str(tmp_path / "workers"), env=ENV, cluster=cluster)
  wait_for_step(model_dir, 3, workers)
  killed = time.monotonic()
  workers[0][0].kill()  # the chief, which holds the cluster's coordination service
  ended = wait_for_exit(workers, 60)
  elapsed = time.monotonic() - killed
  code, _, err = ended[1]
  latest = tf.train.latest_checkpoint(str(model_dir))
  assert code == 2 and elapsed < 30, (code, elapsed, err[-2000:])
  # One line, naming the lost worker, the last checkpoint and what resumes; none of
  # TensorFlow's raw gRPC lines (the tests' shared XLA cache has lines of its own).
  *others, line = err.strip().splitlines()
  assert re.fullmatch(
      rf"error: lost worker 0 \({cluster['worker'][0]}\) after step \d+ \(.+\); the last "
      rf"checkpoint is {re.escape(latest)}: run the same commands on every worker again "
      "to resume from it", line), err
  assert not [l for l in others if re.search("grpc|collective|peer|task:", l, re.I)], err


@pytest.mark.slow
def test_a_cluster_that_never_forms_ends_in_one_line_within_the_bound(data_dir, tmp_path):
  # Worker 0 alone (it holds the coordination service) and worker 1 alone, each in a
  # cluster whose other worker never starts.
  clusters = [loopback_cluster(2), loopback_cluster(2)]
  started = time.monotonic()
  alone = [start_workers(command(data_dir, tmp_path / f"run_{index}",
                                 cluster_wait_seconds=5),
                         str(tmp_path / f"alone_{index}"), env=ENV, cluster=cluster,
                         indices=[index])[0]
           for index, cluster in enumerate(clusters)]
  ended = wait_for_exit(alone, 90)
  elapsed = time.monotonic() - started
  assert elapsed < 60
  for index, ((code, _, err), cluster) in enumerate(zip(ended, clusters)):
    other = 1 - index
    assert code == 2 and err == (
        "error: the multi-worker cluster did not form within 5 s: no word from worker "
        f"{other} ({cluster['worker'][other]}); start every worker of TF_CONFIG's "
        "cluster (or give them longer: \"cluster_wait_seconds\")\n"), err


@pytest.mark.slow
def test_workers_with_other_settings_or_one_gone_stop_before_the_first_step_in_one_line(
    data_dir, tmp_path):
  model_dir = tmp_path / "run"
  cluster = loopback_cluster(2)
  workers = [start_workers(command(data_dir, model_dir, num_train_steps=2,
                                   **({"learning_rate": 0.01} if index else {})),
                           str(tmp_path / "workers"), env=ENV, cluster=cluster,
                           indices=[index])[0] for index in (0, 1)]
  for code, _, err in wait_for_exit(workers, 120):
    assert code == 2 and err == (
        "error: the workers' settings differ: learning_rate 0.0005 on worker 0, 0.01 on "
        "worker 1; give every worker the same settings\n"), err[-2000:]
  assert tf.train.latest_checkpoint(str(model_dir)) is None

  # A worker that ends before the exchange (its vocabulary missing) is named by the other.
  cluster = loopback_cluster(2)
  missing = tmp_path / "none.txt"
  workers = [start_workers(command(data_dir, model_dir, num_train_steps=2,
                                   **({"vocab_file": str(missing)} if index else {})),
                           str(tmp_path / "lost"), env=ENV, cluster=cluster,
                           indices=[index])[0] for index in (0, 1)]
  (code, _, err), (other_code, _, other_err) = wait_for_exit(workers, 120)
  assert other_code == 2
  assert other_err.startswith(f"error: {missing}: vocabulary not found")
  assert code == 2 and re.fullmatch(
      rf"error: lost worker 1 \({cluster['worker'][1]}\) before the first step \(.+\); "
      "see its own error, then run the same commands on every worker again\n", err), err


@pytest.mark.slow
def test_tf_config_out_of_range_or_unused_is_said_in_one_line(data_dir, tmp_path, capsys,
                                                              monkeypatch):
  cluster = loopback_cluster(2)
  monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster,
                                              "task": {"type": "worker", "index": 5}}))
  argv = command(data_dir, tmp_path / "run", num_train_steps=1)[2:]
  capsys.readouterr()
  assert run_pretraining.main(argv) == 2
  assert capsys.readouterr().err == (
      "error: TF_CONFIG's task index 5 (type \"worker\") is not in its cluster of 2 "
      "workers (indices 0 to 1); give each worker its own index in the cluster\n")
  # Left at the default strategy, a run trains alone, and says TF_CONFIG is unused.
  hparams = json.loads(argv[-1])
  hparams.pop("distribution_strategy")
  assert run_pretraining.main(argv[:-1] + [json.dumps(hparams)]) == 0
  assert capsys.readouterr().err.splitlines()[0] == (
      "warning: TF_CONFIG is set, but distribution_strategy is 'default': this process "
      "trains alone, not in TF_CONFIG's cluster; set \"distribution_strategy\": "
      "\"multi_worker\" to train with it, or unset TF_CONFIG")
  assert tf.train.latest_checkpoint(str(tmp_path / "run")).endswith("ckpt-1")
