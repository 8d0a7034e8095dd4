"""End-to-end pre-training on records of the shared English corpus.

A one-layer model trains 100 steps and must clearly learn; eval writes every metric;
the export loads as the original format; the variants train; bad input fails with one
line naming what is wrong. Model sizes are cut down where a check does not need more.
"""

import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import tensorflow as tf

from runs.pretrained import open_weights
from pretrain import config_fitting, input_pipeline, run_record, trainer
from pretrain.config import load_config
from pretrain.eval_metrics import DISC_METRICS, MLM_METRICS
from pretrain.objectives import objective_for
from tests.helpers import (make_data_dir, run_lock_held_elsewhere, save_original,
                           shared_folder, TINY_MODEL, write_records)
from training.curves import CURVES_NAME, EVAL_CURVE_NAME, LOG_NAME, read_eval_curve, read_log
from training import runtime
from training.stopping import TrainingInterrupted
from util import cpu
from util.hparams import HParamsError

SEQ = 64


@pytest.fixture(scope="module")
def data(tmp_path_factory):
  """(data dir, vocabulary size) of records from the shared corpus, made once per
  session (finished_run, trained once, names it in its record). Its models folder, where
  runs named after their tests go, is made with it: a test listing the data dir sees it
  whichever run is first."""
  def make(home):
    make_data_dir(home, SEQ, num_lines=1500)
    (home / "models").mkdir()
  data_dir = shared_folder(tmp_path_factory, "pretrain_run_data", make)
  with open(data_dir / "vocab.txt", encoding="utf-8") as f:
    return str(data_dir), len(f.readlines())


@pytest.fixture(scope="module")
def data_dir(data):
  return data[0]


BASE_VALUES = {"debug": True, "max_seq_length": SEQ, "train_batch_size": 16,
               "log_every_steps": 5, "num_warmup_steps": 10, "learning_rate": 2e-3}


def config_for(data_dir, name, **overrides):
  return load_config(name, data_dir, {**BASE_VALUES, **overrides})


def test_fresh_run_starts_the_heads_at_their_priors_when_asked(data_dir):
  """disc_prior_init and generator_unigram_init set the heads' values at a fresh start;
  without them the heads are the original's (random kernel, zero biases)."""
  for asked in (False, True):
    pretrainer = trainer.Pretrainer(config_for(
        data_dir, f"prior_{asked}", disc_prior_init=asked, generator_unigram_init=asked,
        **TINY_MODEL))
    pretrainer._initialize()  # pylint: disable=protected-access
    electra = pretrainer.model.electra
    kernel = electra.discriminator_head.dense_1.kernel.numpy()
    bias = electra.discriminator_head.dense_1.bias.numpy()
    output_bias = electra.generator_head.output_bias.numpy()
    if asked:
      assert not kernel.any() and bias == pytest.approx(np.log(0.15 / 0.85))
      np.testing.assert_allclose(output_bias, input_pipeline.token_log_frequencies(
          pretrainer.files, pretrainer.config.vocab_size, pretrainer.model.special_tokens),
          rtol=1e-6)
      assert output_bias.max() - output_bias.min() > 3  # frequent and rare tokens
    else:  # the original's random output layer, and zero biases
      assert kernel.std() > 0.01 and not bias.any() and not output_bias.any()


@pytest.mark.slow
def test_disc_lr_multiplier_scales_the_discriminators_variables(data_dir):
  pretrainer = trainer.Pretrainer(config_for(data_dir, "disc_lr", disc_lr_multiplier=0.1,
                                             num_train_steps=2, **TINY_MODEL))
  multiplier = pretrainer._lr_multiplier()  # pylint: disable=protected-access
  electra = pretrainer.model.electra
  disc = electra.discriminator.transformer_layers[0].trainable_variables + \
      electra.discriminator_head.trainable_variables + \
      electra.discriminator.embeddings.trainable_variables  # shared with the generator
  generator_own = electra.generator_head.trainable_variables + \
      electra.generator.transformer_layers[0].trainable_variables + \
      electra.generator.embeddings_project.trainable_variables
  assert {multiplier(v) for v in disc} == {0.1}
  assert {multiplier(v) for v in generator_own} == {1.0}
  # One training step: the optimizer applies it.
  pretrainer.train()
  settings = pretrainer.optimizer.variable_settings
  assert settings(disc[0])[0] == 0.1 and settings(generator_own[0])[0] == 1.0
  assert trainer.Pretrainer(config_for(data_dir, "one_rate", **TINY_MODEL)
                           )._lr_multiplier() is None  # pylint: disable=protected-access
  # disc_warmup_steps: the discriminator's multiplier becomes a schedule of the step
  # (its values: tests/test_optimization.py); the generator's stays 1.
  own = trainer.Pretrainer(config_for(data_dir, "disc_warmup", disc_lr_multiplier=0.1,
                                      disc_warmup_steps=40, num_train_steps=100,
                                      **TINY_MODEL))
  multiplier = own._lr_multiplier()  # pylint: disable=protected-access
  schedule = multiplier(own.model.electra.discriminator_head.trainable_variables[0])
  warmup = own.config.num_warmup_steps
  assert float(schedule(warmup)) == pytest.approx(0.1 * warmup / 40)
  assert float(schedule(40)) == pytest.approx(0.1)
  assert multiplier(own.model.electra.generator_head.trainable_variables[0]) == 1.0


def window_mean(log, key, steps):
  return float(np.mean([log[s][key] for s in steps]))


@pytest.mark.slow
def test_debug_model_learns_then_eval_and_export(data):
  data_dir, vocab_size = data
  config = config_for(data_dir, "learn", num_train_steps=100, save_checkpoints_steps=50,
                      do_eval=True, num_eval_steps=4, eval_batch_size=16, **TINY_MODEL)
  hidden = TINY_MODEL["model_hparam_overrides"]["hidden_size"]
  results = trainer.run(config)
  log = read_log(os.path.join(config.model_dir, LOG_NAME))
  assert sorted(log) == [1] + list(range(5, 101, 5))
  early, late = [1], range(75, 101, 5)  # at initialization; after most training
  assert window_mean(log, "mlm_loss", late) < window_mean(log, "mlm_loss", early) - 1.0
  assert window_mean(log, "disc_loss", late) < 0.75 * window_mean(log, "disc_loss", early)
  assert window_mean(log, "masked_lm_accuracy", late) > window_mean(
      log, "masked_lm_accuracy", early) + 0.03
  assert window_mean(log, "disc_accuracy", late) > 0.8  # most tokens are real
  assert log[100]["learning_rate"] == pytest.approx(2e-3 / 100, rel=1e-3)

  # Eval: every metric, in the text file and the JSON beside it.
  results_txt = os.path.join(config.model_dir, "results", "unsup_results.txt")
  with open(results_txt, encoding="utf-8") as f:
    lines = dict(line.strip().split(" = ") for line in f)
  with open(results_txt.replace(".txt", ".json"), encoding="utf-8") as f:
    as_json = json.load(f)
  for name in MLM_METRICS + DISC_METRICS:
    assert float(lines[name]) == pytest.approx(as_json[name]) == results[name]
  assert as_json["global_step"] == 100
  assert as_json["masked_lm_accuracy"] > 0.03 and 0.0 <= as_json["disc_auc"] <= 1.0
  for name in ("disc_auc_fixed", "disc_state_cosine"):
    assert float(lines[name]) == pytest.approx(as_json[name]) == results[name]
  assert 0.0 <= as_json["disc_auc_fixed"] <= 1.0
  assert -1.0 <= as_json["disc_state_cosine"] <= 1.0
  # The curve of evaluated checkpoints, and TensorBoard's eval scalars.
  assert read_eval_curve(os.path.join(config.model_dir, EVAL_CURVE_NAME)) == {
      100: {k: v for k, v in results.items() if k != "global_step"}}
  assert os.listdir(os.path.join(config.model_dir, "eval"))

  # Export: original names, loadable by the fine-tuning path, with config and vocab
  # (and the text's normalisation: tests/test_languages.py).
  export = os.path.join(config.model_dir, trainer.EXPORT_DIR)
  assert sorted(n for n in os.listdir(export) if not n.endswith(".index") and
                not n.startswith("model.ckpt-100.data")) == [
                    "checkpoint", "config.json", "tokenizer_config.json", "vocab.txt"]
  names = dict(tf.train.list_variables(os.path.join(export, "model.ckpt-100")))
  assert names["electra/embeddings/word_embeddings"] == [
      vocab_size, TINY_MODEL["embedding_size"]]
  assert "generator_predictions/output_bias" in names and "global_step" in names
  pair = open_weights(export).load_pair()
  assert pair.model_config.hidden_size == hidden
  assert os.path.getsize(os.path.join(config.model_dir, CURVES_NAME)) > 10000
  assert tf.io.gfile.glob(os.path.join(config.model_dir, "train", "events.*"))

  # The same command again: nothing left to train; the model dir's config matches.
  assert trainer.run(dataclasses.replace(config, do_eval=False)) == {}

  # A new run from the exported checkpoint (init_checkpoint, no optimizer slots) holds
  # the same weights: evaluating it reproduces every metric.
  continued = config_for(data_dir, "continued", do_train=False, do_eval=True,
                         num_eval_steps=4, eval_batch_size=16, init_checkpoint=export,
                         **TINY_MODEL)
  again = trainer.run(continued)
  for name in MLM_METRICS + DISC_METRICS:
    assert again[name] == pytest.approx(results[name], abs=1e-6), name


@pytest.mark.slow
def test_mlm_only_baseline_trains(data):
  data_dir, vocab_size = data
  config = config_for(data_dir, "mlm_only", num_train_steps=20, save_checkpoints_steps=20,
                      electra_objective=False, **TINY_MODEL)
  trainer.run(config)
  log = read_log(os.path.join(config.model_dir, LOG_NAME))
  assert log[20]["mlm_loss"] < log[1]["mlm_loss"] - 0.5
  assert "disc_loss" not in log[20]
  with open(os.path.join(config.model_dir, run_record.RUN_CONFIG), encoding="utf-8") as f:
    assert json.load(f)["trained_part"] == "generator"  # for the weights' readers
  # FLOPs so far (the data's vocabulary sets vocab_size) and a measured rate.
  per_step = objective_for(dataclasses.replace(config, vocab_size=vocab_size)
                           ).flops().train_flops_per_step
  for step in (5, 20):
    assert log[step]["train_flops"] == pytest.approx(step * per_step)
    assert log[step]["flops_per_s"] > 0
    # The fraction of this CPU's peak (its flags and maximum clock; none without one).
    peak = cpu.cpu_peak_flops()
    assert log[step].get("peak_fraction") == (pytest.approx(
        log[step]["flops_per_s"] / peak, rel=1e-6) if peak else None)
    assert 0 < log[step].get("peak_fraction", 0.5) < 1
  assert tf.train.latest_checkpoint(config.model_dir).endswith("ckpt-20")


def sigterm_when_logged(model_dir, step):
  """Sends this process SIGTERM once the run has logged `step` (from a thread)."""
  path = os.path.join(model_dir, LOG_NAME)

  def watch():
    while not (os.path.exists(path) and step in read_log(path)):
      time.sleep(0.05)
    os.kill(os.getpid(), signal.SIGTERM)
  thread = threading.Thread(target=watch, daemon=True)
  thread.start()
  return thread


@pytest.mark.slow
def test_electric_trains_and_kill_and_resume_continues_the_same_curve(data_dir):
  # Dropout stays on: its generator state is part of the checkpoint.
  whole = config_for(data_dir, "whole", num_train_steps=8, log_every_steps=1,
                     save_checkpoints_steps=100, num_warmup_steps=2,
                     electric_objective=True, **TINY_MODEL)
  trainer.run(whole)
  killed = dataclasses.replace(whole, model_name="killed",
                               model_dir=whole.model_dir.replace("whole", "killed"))
  watcher = sigterm_when_logged(killed.model_dir, 3)
  with pytest.raises(TrainingInterrupted, match="SIGTERM at step"):
    trainer.run(killed)
  watcher.join()
  stopped = int(tf.train.latest_checkpoint(killed.model_dir).rsplit("-", 1)[1])
  assert 3 <= stopped < 8
  trainer.run(killed)  # the same command again
  logs = [read_log(os.path.join(c.model_dir, LOG_NAME))
          for c in (whole, killed)]
  assert sorted(logs[1]) == list(range(1, 9))
  for step in range(1, 9):
    assert logs[1][step]["loss"] == logs[0][step]["loss"], step
  # Electric: the two-tower cloze generator learns; the discriminator is trained.
  assert logs[0][8]["cloze_loss"] < logs[0][1]["cloze_loss"] - 0.2
  assert "disc_loss" in logs[0][8]


def test_bad_inputs_fail_with_one_line(data, tmp_path):
  data_dir, vocab_size = data
  # Everything here fails before a model is built, so it runs in-process.
  def error(config):
    with pytest.raises(ValueError) as info:
      trainer.run(config)
    return str(info.value)

  assert "run `python build_pretraining_dataset.py --data-dir" in error(
      config_for(str(tmp_path), "x"))
  assert "records hold sequences of length 64 but max_seq_length is 128" in error(
      config_for(data_dir, "x", max_seq_length=128))
  # The vocabulary's size: checked as the config is built.
  with pytest.raises(HParamsError, match=f"holds {vocab_size} tokens but the config "
                     r"\(vocab_size\) has a vocabulary of 1000; set \"vocab_size\": "
                     f"{vocab_size}$"):
    config_for(data_dir, "x", vocab_size=1000)

  # A model dir holding another model's run.
  config = config_for(data_dir, "x", vocab_size=vocab_size,
                      model_dir=str(tmp_path / "other_run"))
  run_record.write_run_config(config)
  other = dataclasses.replace(config, model_hparam_overrides={"num_hidden_layers": 2})
  message = error(other)
  assert "holds a run with a different config (num_hidden_layers: 3 -> 2)" in message
  assert "overwrite_model_dir" in message
  # The same run resumes, another objective is refused.
  masked_lm = dataclasses.replace(config, objective="masked_lm",
                                  model_dir=str(tmp_path / "masked_lm_run"))
  run_record.write_run_config(masked_lm)
  run_record.check_model_dir(masked_lm)
  run_record.check_model_dir(dataclasses.replace(masked_lm, do_train=False))
  with pytest.raises(HParamsError, match=r"objective: 'masked_lm' -> 'electra'"):
    run_record.check_model_dir(dataclasses.replace(masked_lm, objective="electra"))
  # ... unless told: then the old run is deleted.
  run_record.check_model_dir(dataclasses.replace(other, overwrite_model_dir=True))
  assert not (tmp_path / "other_run").exists()

  # A checkpoint with another vocabulary.
  small_vocab = str(tmp_path / "ckpt" / "model.ckpt-1")
  from model.config import ModelConfig  # pylint: disable=g-import-not-at-top
  from model.electra import ElectraPair  # pylint: disable=g-import-not-at-top
  pair = ElectraPair(ModelConfig.from_size("debug", vocab_size=100)).build_variables()
  save_original(pair, small_vocab)
  assert (f"holds {vocab_size} tokens but init_checkpoint {small_vocab} has a vocabulary "
          "of 100; use the checkpoint's vocab.txt") in error(
      config_for(data_dir, "x", init_checkpoint=small_vocab))

  # One of the right sizes, cut short: one line, not TensorFlow's IndexError.
  fitting = config_for(data_dir, "x", vocab_size=vocab_size, num_train_steps=1,
                       model_dir=str(tmp_path / "from_cut"), **TINY_MODEL)
  cut = tmp_path / "cut" / "model.ckpt"
  save_original(ElectraPair(fitting.model_config()).build_variables(), str(cut))
  data_file = next((tmp_path / "cut").glob("*.data-*"))
  data_file.write_bytes(data_file.read_bytes()[:data_file.stat().st_size // 2])
  assert error(dataclasses.replace(fitting, init_checkpoint=str(cut))) == (
      f"{data_file}: Read less bytes than requested; the checkpoint is cut short or "
      "damaged: copy or fetch it again")
  # ... and leaves no record of a run that never trained: the corrected run starts.
  assert not (tmp_path / "from_cut" / run_record.RUN_CONFIG).exists()
  run_record.check_model_dir(fitting)

  # A corrupt shard, named.
  corrupt_dir = tmp_path / "corrupt"
  bad = corrupt_dir / "pretrain_tfrecords" / "pretrain_data.tfrecord-0-of-1"
  write_records(str(bad), [[101, 5, 102]], SEQ)
  bad.write_bytes(b"garbage" + bad.read_bytes())
  (corrupt_dir / "vocab.txt").write_text(open(os.path.join(
      data_dir, "vocab.txt"), encoding="utf-8").read(), encoding="utf-8")
  assert f"{bad}: not a readable TFRecord file" in error(
      config_for(str(corrupt_dir), "x"))


def test_a_model_dir_is_a_folder_of_its_own(data_dir, tmp_path):
  """Neither the data dir, its models folder, a folder holding them nor a folder of
  other files becomes a run's model dir (overwrite_model_dir deleted one whole)."""
  def refusal(model_dir):
    with pytest.raises(HParamsError) as info:
      trainer.run(config_for(data_dir, "x", model_dir=str(model_dir),
                             overwrite_model_dir=True))
    return str(info.value)

  models = os.path.join(data_dir, "models")
  own = "; a run's model dir is a folder of its own: give another --model-name or model_dir"
  held = sorted(os.listdir(data_dir))
  for model_dir, problem in (
      (data_dir, f"is the data dir ({data_dir})"),
      (models, f"is the data dir's models folder ({models})"),
      (os.path.dirname(data_dir), f"holds the data dir ({data_dir})")):
    assert refusal(model_dir) == f"the model dir {model_dir} {problem}{own}"
  assert sorted(os.listdir(data_dir)) == held
  mine = tmp_path / "mine"
  (mine / "train").mkdir(parents=True)  # a name runs write too: theirs all the same
  (mine / "notes.txt").write_text("mine")
  refused = (f"{mine} holds no run (pretrain_config.json), and what no run writes "
             f"(notes.txt){own}")
  assert refusal(mine) == refused
  assert sorted(os.listdir(mine)) == ["notes.txt", "train"]
  # Checkpoints that carry no record, beside other files (a released model's folder):
  # kept all the same.
  tf.train.Checkpoint(step=tf.Variable(1, dtype=tf.int64)).write(str(mine / "ckpt-1"))
  held = sorted(os.listdir(mine))
  assert refusal(mine) == refused
  assert sorted(os.listdir(mine)) == held


def test_a_discriminator_ramp_longer_than_the_run_is_warned_of(data_dir, capsys):
  for ramp, warned in ((100, False), (400, True)):
    config_fitting.checked_and_sized(config_for(data_dir, "x", num_train_steps=100,
                                         disc_weight_ramp_steps=ramp))
    err = capsys.readouterr().err
    assert (err == "warning: disc_weight_ramp_steps 400 is longer than num_train_steps "
            "100: the discriminator's loss weight ends at 25% of disc_weight 50\n"
            ) if warned else err == ""


def test_script_prints_one_line_errors(tmp_path, capsys):
  import run_pretraining  # pylint: disable=g-import-not-at-top
  args = ["--data-dir", str(tmp_path), "--model-name", "electra_small"]
  assert run_pretraining.main(args + ["--hparams", '{"num_train_step": 5}']) == 2
  assert capsys.readouterr().err.strip().splitlines()[-1] == (
      "error: --hparams: unknown hyperparameter 'num_train_step'; did you mean "
      "'num_train_steps'?")
  for steps in ("-3", "0", "2,x"):  # never a checkpoint: refused, not looked for
    with pytest.raises(SystemExit):
      run_pretraining.main(args + [f"--export-steps={steps}"])
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(
        f"error: --export-steps '{steps}': expected training steps (at least 1) such as "
        "1000,2000")
  assert run_pretraining.main(args) == 2
  assert capsys.readouterr().err.strip().splitlines()[-1] == (
      f"error: no pre-training data: nothing matches {tmp_path}/pretrain_tfrecords/"
      f"pretrain_data.tfrecord*; run `python build_pretraining_dataset.py --data-dir "
      f"{tmp_path}` first (or set pretrain_tfrecords)")


@pytest.mark.slow
def test_one_run_per_model_dir_and_a_killed_runs_lock_is_taken_over(data, run_copy,
                                                                   tmp_path, capsys):
  import run_pretraining  # pylint: disable=g-import-not-at-top
  data_dir, _ = data
  model_dir = run_copy
  # The finished run's own settings: once the lock is taken, there is nothing to train
  # (the lock is the point here, not a training step).
  args = script_args(data_dir, model_dir, **FINISHED)
  contents = {p: p.read_bytes() for p in model_dir.rglob("*") if p.is_file()}
  with run_lock_held_elsewhere(model_dir) as holder:
    assert run_pretraining.main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {model_dir} is in use by another run (pid "
                          f"{holder.pid}: {sys.executable} -c ") and err.count("\n") == 1
    assert err.endswith("; wait for it to finish or stop it, or use another model_dir\n")
    # Through a link to it too: one folder, one lock.
    (tmp_path / "link").symlink_to(model_dir)
    assert run_pretraining.main(script_args(data_dir, tmp_path / "link", **FINISHED)) == 2
    assert capsys.readouterr().err.startswith(
        f"error: {tmp_path / 'link'} is in use by another run (pid {holder.pid}: ")
    # Refused before writing anything.
    assert {p: p.read_bytes() for p in model_dir.rglob("*") if p.is_file()} == contents
  # The holder was killed (no clean-up): the OS released its lock, the run proceeds.
  assert run_pretraining.main(args) == 0
  out = capsys.readouterr().out
  assert f"taking over the lock of {model_dir} from a run that ended without releasing " \
      f"it (pid {holder.pid}: " in out
  assert f"resuming from {model_dir}/ckpt-4 at step 4/4" in out
  # Released at the end: no holder named, and the next run may take the lock at once.
  assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == [".run.lock"]


MIRRORED_SCRIPT = """
import json, os, sys, tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from pretrain import trainer
from pretrain.config import load_config
from training.curves import LOG_NAME, read_log
losses = {}
for strategy in ("default", "mirrored"):
  config = load_config("mirror_" + strategy, sys.argv[1],
                       {**json.loads(sys.argv[2]), "distribution_strategy": strategy})
  trainer.run(config)
  log = read_log(os.path.join(config.model_dir, LOG_NAME))
  losses[strategy] = [log[s]["loss"] for s in (1, 2, 3)]
print(json.dumps(losses))
"""
NO_DROPOUT_TINY_MODEL = {**TINY_MODEL, "model_hparam_overrides": {
    **TINY_MODEL["model_hparam_overrides"], "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0}}


@pytest.mark.slow
def test_mirrored_over_two_cpus_gives_the_loss_of_one_device(data, tmp_path):
  # Static masks and no dropout make the step deterministic whatever the replica, so
  # two replicas (8 examples each) must reproduce one device (16) step after step.
  data_dir, vocab_size = data
  rng = np.random.default_rng(0)
  sequences, masks = [], []
  for _ in range(32):
    sequences.append([101] + rng.integers(104, vocab_size, SEQ - 2).tolist() + [102])
    positions = sorted(rng.choice(np.arange(1, SEQ - 1), 9, replace=False).tolist())
    masks.append((positions, [sequences[-1][p] for p in positions], [1.0] * 9))
  root = tmp_path / "static"
  write_records(str(root / "pretrain_tfrecords" / "pretrain_data.tfrecord-0-of-1"),
                sequences, SEQ, masks)
  (root / "vocab.txt").write_text(open(os.path.join(data_dir, "vocab.txt"),
                                       encoding="utf-8").read(), encoding="utf-8")
  values = {**BASE_VALUES, "num_train_steps": 3, "log_every_steps": 1,
            "electra_objective": False, **NO_DROPOUT_TINY_MODEL}
  out = subprocess.run([sys.executable, "-c", MIRRORED_SCRIPT, str(root),
                        json.dumps(values)], capture_output=True, text=True)
  assert out.returncode == 0, out.stderr[-3000:]
  losses = json.loads(out.stdout.strip().splitlines()[-1])
  np.testing.assert_allclose(losses["mirrored"], losses["default"], rtol=1e-5)
  assert losses["default"][2] < losses["default"][0]  # it trains


def script_args(data_dir, model_dir, **hparams):
  # config_for's batch size: the fused layers' compiled islands (model/fused.py), one
  # compilation per shape and several CPU-seconds each, then serve every run here.
  return ["--data-dir", data_dir, "--model-name", "x", "--hparams", json.dumps(
      {"debug": True, "max_seq_length": SEQ, "train_batch_size": 16, "num_train_steps": 2,
       "save_checkpoints_steps": 2, "model_dir": str(model_dir), **TINY_MODEL,
       **hparams})]


# The run the tests below resume, damage, evaluate or read: 4 steps, checkpoints at 2
# and 4. Trained once per session; each test works on a copy of its own.
FINISHED = {"num_train_steps": 4, "log_every_steps": 1, "num_warmup_steps": 1,
            "learning_rate": 1e-3}


@pytest.fixture(scope="module")
def finished_run(data_dir, tmp_path_factory):
  import run_pretraining  # pylint: disable=g-import-not-at-top
  def train(home):
    assert run_pretraining.main(script_args(data_dir, home / "run", **FINISHED)) == 0
  return shared_folder(tmp_path_factory, "pretrain_run_finished", train) / "run"


@pytest.fixture
def run_copy(finished_run, tmp_path):
  """A copy of finished_run in the test's folder (its checkpoint list names its files
  relative to its folder, as a moved run's does)."""
  shutil.copytree(finished_run, tmp_path / "run")
  return tmp_path / "run"


@pytest.mark.slow
def test_a_changed_setting_is_refused_and_the_record_keeps_every_value(data, run_copy,
                                                                      capsys):
  import run_pretraining  # pylint: disable=g-import-not-at-top
  data_dir, _ = data
  model_dir = run_copy
  record = model_dir / run_record.RUN_CONFIG
  written = record.read_text()
  def args(**changes):
    return script_args(data_dir, model_dir, **{**FINISHED, **changes})
  # A field that fixes the trained weights: refused, the record as it was.
  assert run_pretraining.main(args(learning_rate=0.01)) == 2
  assert capsys.readouterr().err == (
      f"error: {model_dir} holds a run with a different config (learning_rate: 0.001 ->"
      " 0.01); use another model_dir, or set \"overwrite_model_dir\": true to delete "
      "that run, checkpoints included, and start over\n")
  assert record.read_text() == written
  # Lost or emptied, the record is rebuilt, whole, from the copy every checkpoint
  # carries, and still guards the run: a changed setting or size is one line.
  larger = {**TINY_MODEL["model_hparam_overrides"], "hidden_size": 128}
  for problem, damage in (("is missing", record.unlink),
                          ("is empty", lambda: record.write_text("{}"))):
    for changed, shown in (({"learning_rate": 0.01}, "learning_rate: 0.001 -> 0.01"),
                           ({"model_hparam_overrides": larger}, "hidden_size: 64 -> 128")):
      damage()
      assert run_pretraining.main(args(**changed)) == 2
      captured = capsys.readouterr()
      assert captured.out.endswith(f"\nnote: {record}, the run's record, {problem}; "
                                   "rebuilt it from the copy ckpt-4 carries\n")
      assert captured.err == (
          f"error: {model_dir} holds a run with a different config ({shown}); use "
          "another model_dir, or set \"overwrite_model_dir\": true to delete that run, "
          "checkpoints included, and start over\n")
      assert record.read_text() == written
  # Continuing the run (more steps, other logging), its record lost: accepted, each
  # value kept with the step it held from; an input position cut short is read as none.
  record.unlink()
  position = next((model_dir / "data_state" / "worker_0").glob("ckpt-4.data-*"))
  position.write_bytes(position.read_bytes()[:position.stat().st_size // 2])
  assert run_pretraining.main(args(num_train_steps=6, log_every_steps=2)) == 0
  assert (f"note: no input position for {model_dir}/ckpt-4 ({model_dir}/data_state/"
          "worker_0/ckpt-4: Read less bytes than requested); the data starts over\n"
          "resuming from") in capsys.readouterr().out
  saved = json.loads(record.read_text())
  first, resumed = saved["history"]
  assert first["from_step"] == 0 and first["num_train_steps"] == 4
  assert first["log_every_steps"] == 1 and first["save_checkpoints_steps"] == 2
  # (The copy is a run moved to another folder: the move is recorded too.)
  assert resumed == {"from_step": 4, "num_train_steps": 6, "log_every_steps": 2,
                     "model_dir": str(model_dir)}
  assert saved["config"]["num_train_steps"] == 6
  assert saved["signature"]["learning_rate"] == 1e-3
  # Checkpoints that carry no copy (saved before they did), the record lost: refused,
  # naming the file, never trained on under unknown settings.
  tf.train.Checkpoint(step=tf.Variable(8, dtype=tf.int64)).write(str(model_dir / "ckpt-8"))
  (model_dir / "checkpoint").unlink()
  record.unlink()
  assert run_pretraining.main(args(num_train_steps=10)) == 2
  assert capsys.readouterr().err == (
      f"error: {record}: the run's record is missing, and its checkpoints (ckpt-8 and "
      "older) carry no copy of it (saved before checkpoints did), so the settings they "
      "were trained with are unknown: put the file back, or use another model_dir, or "
      "set \"overwrite_model_dir\": true to delete the run and start over\n")
  assert not record.exists()


@pytest.mark.slow
def test_evaluating_a_finished_run_compares_only_what_gives_the_weights_meaning(
    data, run_copy, capsys):
  import run_pretraining  # pylint: disable=g-import-not-at-top
  data_dir, _ = data
  model_dir = run_copy
  # The optimizer, schedule, seed and eval sizes differ from the run's: it evaluates.
  evaluate = dict(do_train=False, do_eval=True, num_eval_steps=2, eval_batch_size=16)
  assert run_pretraining.main(script_args(data_dir, model_dir, **evaluate, seed=3)) == 0
  out = capsys.readouterr().out
  assert "eval results" in out and "global_step = 4" in out
  kept = sorted(os.listdir(model_dir))
  # Another objective gives the weights another meaning: refused, told or not to
  # overwrite, and the run is kept.
  for overwrite in (False, True):
    assert run_pretraining.main(script_args(
        data_dir, model_dir, **evaluate, temperature=2.0, disc_weight=10.0,
        overwrite_model_dir=overwrite)) == 2
    assert capsys.readouterr().err == (
        f"error: {model_dir} holds a run of another model (disc_weight: 50.0 -> 10.0; "
        "temperature: 1.0 -> 2.0); evaluate it with the run's own values (its "
        "pretrain_config.json), or use another model_dir\n")
  assert sorted(os.listdir(model_dir)) == kept
  # Training with many changes lists four and counts the rest.
  assert run_pretraining.main(script_args(
      data_dir, model_dir, num_warmup_steps=2, learning_rate=2e-3, seed=1,
      temperature=2.0, disc_weight=10.0, gen_weight=2.0)) == 2
  assert capsys.readouterr().err == (
      f"error: {model_dir} holds a run with a different config (disc_weight: 50.0 -> "
      "10.0; gen_weight: 1.0 -> 2.0; learning_rate: 0.001 -> 0.002; num_warmup_steps: 1 "
      "-> 2; and 2 more); use another model_dir, or set \"overwrite_model_dir\": true to "
      "delete that run, checkpoints included, and start over\n")


@pytest.mark.slow
def test_overwrite_deletes_only_what_runs_write(data, run_copy, capsys):
  """overwrite_model_dir deletes the run (trained, exported, evaluated) and keeps what
  runs do not write there: a user's file, fine-tuning's outputs."""
  import run_pretraining  # pylint: disable=g-import-not-at-top
  data_dir, _ = data
  model_dir = run_copy
  assert run_pretraining.main(script_args(
      data_dir, model_dir, **FINISHED, do_train=False, do_eval=True, num_eval_steps=1,
      eval_batch_size=16)) == 0
  (model_dir / "notes.txt").write_text("mine")
  (model_dir / "finetuning_models" / "glue_sst2_model_1").mkdir(parents=True)
  (model_dir / "results" / "glue_sst2_results.txt").write_text("scores")
  capsys.readouterr()
  run_record.check_model_dir(config_for(
      data_dir, "x", model_dir=str(model_dir), **TINY_MODEL,
      **dict(FINISHED, learning_rate=0.01), overwrite_model_dir=True))
  assert capsys.readouterr().out == (
      f"overwrite_model_dir: deleting the previous run in {model_dir}\nnote: kept what "
      f"no run writes in {model_dir}: finetuning_models, notes.txt, results\n")
  assert sorted(os.listdir(model_dir)) == ["finetuning_models", "notes.txt", "results"]
  assert os.listdir(model_dir / "results") == ["glue_sst2_results.txt"]
  assert os.listdir(model_dir / "finetuning_models") == ["glue_sst2_model_1"]


@pytest.mark.slow
def test_a_truncated_checkpoint_is_skipped_for_the_newest_whole_one(data, run_copy,
                                                                   capsys):
  import run_pretraining  # pylint: disable=g-import-not-at-top
  data_dir, _ = data
  model_dir = run_copy
  def args(**changes):
    return script_args(data_dir, model_dir, **{**FINISHED, **changes})

  def truncate(step):
    data_file = model_dir / f"ckpt-{step}.data-00000-of-00001"
    data_file.write_bytes(data_file.read_bytes()[:data_file.stat().st_size // 2])
    return data_file
  newest = truncate(4)  # as a full disk or a copy cut short leaves it
  assert run_pretraining.main(args(num_train_steps=6)) == 0
  out = capsys.readouterr().out
  assert (f"note: skipping checkpoint ckpt-4, which cannot be read ({newest}: Read less "
          f"bytes than requested)\nresuming from {model_dir}/ckpt-2 at step 2/6") in out
  assert tf.train.latest_checkpoint(str(model_dir)).endswith("ckpt-6")
  # Steps 3 and 4 were trained again: the log holds each step once, the redone rows.
  with open(model_dir / LOG_NAME, encoding="utf-8") as f:
    assert [json.loads(line)["step"] for line in f] == [1, 2, 3, 4, 5, 6]
  # Fewer steps than the run has done: said, nothing trained.
  assert run_pretraining.main(args(num_train_steps=5)) == 0
  assert (f"note: the run in {model_dir} is already at step 6, past num_train_steps 5: "
          "nothing to train (raise num_train_steps to continue it)\n"
          f"resuming from {model_dir}/ckpt-6 at step 6/5") in capsys.readouterr().out
  # Nothing reads whole (ckpt-4 was written again): one line naming the newest's file.
  for step in (2, 4, 6):
    newest = truncate(step)
  assert run_pretraining.main(args(num_train_steps=8)) == 2
  assert capsys.readouterr().err == (
      f"error: {newest}: Read less bytes than requested; no checkpoint in {model_dir} "
      f"reads whole: delete {model_dir} to start the run over\n")


@pytest.mark.slow
def test_checkpoints_whose_state_file_is_lost_are_found_not_trained_over(data, run_copy,
                                                                        capsys):
  import run_pretraining  # pylint: disable=g-import-not-at-top
  data_dir, _ = data
  model_dir = run_copy
  def args(**changes):
    return script_args(data_dir, model_dir, **{**FINISHED, **changes})
  (model_dir / "checkpoint").unlink()
  assert run_pretraining.main(args(num_train_steps=10)) == 0
  assert (f"note: {model_dir}/checkpoint, the list of the run's checkpoints, is missing; "
          "found ckpt-2, ckpt-4 on disk\n"
          f"resuming from {model_dir}/ckpt-4 at step 4/10") in capsys.readouterr().out
  # The state file lists them again: the manager keeps managing the old ones.
  assert tf.train.get_checkpoint_state(str(model_dir)).all_model_checkpoint_paths == [
      str(model_dir / f"ckpt-{step}") for step in (2, 4, 6, 8, 10)]
  # Also the newest's index gone: the newest whole one.
  (model_dir / "checkpoint").unlink()
  (model_dir / "ckpt-10.index").unlink()
  assert run_pretraining.main(args(num_train_steps=12)) == 0
  out = capsys.readouterr().out
  assert (f"note: {model_dir}/checkpoint, the list of the run's checkpoints, is missing; "
          "found ckpt-2, ckpt-4, ..., ckpt-10 (5) on disk\n"
          f"note: skipping checkpoint ckpt-10, which cannot be read ({model_dir}/ckpt-10"
          ".index: ") in out
  assert f"resuming from {model_dir}/ckpt-8 at step 8/12" in out
  with open(model_dir / LOG_NAME, encoding="utf-8") as f:
    assert [json.loads(line)["step"] for line in f] == list(range(1, 13))
  # None whole: refused, naming them, and the run is not started over.
  (model_dir / "checkpoint").unlink()
  for index in model_dir.glob("ckpt-*.index"):
    index.unlink()
  assert run_pretraining.main(args(num_train_steps=14)) == 2
  err = capsys.readouterr().err
  assert err.startswith(f"error: {model_dir}/ckpt-12.index: ") and err.endswith(
      f"; no checkpoint in {model_dir} reads whole: delete {model_dir} to start the run "
      "over\n")
  with open(model_dir / LOG_NAME, encoding="utf-8") as f:
    assert [json.loads(line)["step"] for line in f] == list(range(1, 13))


def test_a_step_too_big_for_the_memory_is_refused_with_its_figures(data, tmp_path,
                                                                   capsys):
  import run_pretraining  # pylint: disable=g-import-not-at-top
  data_dir, vocab_size = data
  model_dir = tmp_path / "run"
  fix = ("lower train_batch_size or max_seq_length, or set \"gradient_accumulation_steps\" "
         "(the same update in smaller pieces) or \"recompute\": true\n")
  assert run_pretraining.main(script_args(data_dir, model_dir,
                                          train_batch_size=100000)) == 2
  err = capsys.readouterr().err
  assert re.fullmatch(
      r"error: a training step needs about [\d,.]+ GiB \(activations [\d,.]+ GiB, of "
      r"which attention [\d,.]+ GiB; weights, gradients and optimizer [\d.]+ GiB\) but "
      r"this machine has [\d,.]+ GiB available; " + re.escape(fix), err), err
  assert not (model_dir / run_record.RUN_CONFIG).exists()
  # Long sequences: the attention's [heads, S, S] tensors, refused before the first
  # model call (which would not return for minutes).
  long_data = tmp_path / "long"
  seq = 32768
  write_records(str(long_data / "pretrain_tfrecords" / "pretrain_data.tfrecord-0-of-1"),
                [[101] + [200] * 50 + [102]] * 2, seq)
  shutil.copyfile(os.path.join(data_dir, "vocab.txt"), long_data / "vocab.txt")
  assert run_pretraining.main(script_args(
      str(long_data), model_dir, max_seq_length=seq, train_batch_size=8,
      model_hparam_overrides={**TINY_MODEL["model_hparam_overrides"],
                              "max_position_embeddings": seq})) == 2
  err = capsys.readouterr().err
  attention = float(re.search(r"of which attention ([\d,.]+) GiB", err)[1].replace(",", ""))
  # One head x 32768^2 floats x 3 tensors x 8 sequences (plus the generator's), at least.
  assert attention >= 3 * seq * seq * 4 * 8 / 2**30 and err.endswith(fix), err
  # Close to the limit: a warning, and the run goes on.
  config = config_for(data_dir, "x", vocab_size=vocab_size)
  assert config.max_seq_length == SEQ
  memory = objective_for(config).step_memory(16)
  total = memory.activations + memory.weights + memory.runtime  # float32, one replica
  runtime.check_step_memory(tf.distribute.get_strategy(), "float32", memory,
                            available=total / 0.9)
  assert capsys.readouterr().err.startswith(
      "warning: a training step needs about ")
  runtime.check_step_memory(tf.distribute.get_strategy(), "float32", memory,
                            available=total * 2)
  assert capsys.readouterr().err == ""


def test_a_long_first_step_is_announced():
  from training.step_log import first_step_note  # pylint: disable=g-import-not-at-top
  # 100 GFLOP/s of peak: a 3.2e13-FLOP step (max_seq_length 32768) takes > 10 minutes.
  assert first_step_note(3.2e13, 1e11) == (
      "note: one training step is 3.2e+13 FLOPs: the first takes at least 10m40s on these "
      "devices (and compiles first); no line comes before it ends")
  assert first_step_note(1e9, 1e11) is None and first_step_note(3.2e13, 0) is None


def test_records_of_another_vocabulary_are_refused_before_anything_is_made(
    data, tmp_path, capsys):
  import run_pretraining  # pylint: disable=g-import-not-at-top
  data_dir, vocab_size = data
  small = tmp_path / "small_vocab"
  small.mkdir()
  os.symlink(os.path.join(data_dir, "pretrain_tfrecords"), small / "pretrain_tfrecords")
  with open(os.path.join(data_dir, "vocab.txt"), encoding="utf-8") as f:
    (small / "vocab.txt").write_text("".join(f.readlines()[:200]), encoding="utf-8")
  model_dir = tmp_path / "run"
  assert run_pretraining.main(script_args(str(small), model_dir)) == 2
  err = capsys.readouterr().err
  first = sorted(tf.io.gfile.glob(str(small / "pretrain_tfrecords" / "*")))[0]
  assert err.startswith(f"error: {first}: token id ") and err.count("\n") == 1
  assert err.endswith(
      f" in its first records is outside the vocabulary of 200 tokens ({small}/vocab.txt)"
      "; the records were built with another vocabulary: set vocab_file to the "
      "vocab.txt they were built with, or rebuild them with this one\n")
  assert not model_dir.exists()


@pytest.mark.slow
def test_a_pretraining_model_dir_is_read_where_a_checkpoint_is_expected(
    data, run_copy, tmp_path, capsys):
  import run_pretraining  # pylint: disable=g-import-not-at-top
  from tools import export_hf, reference_outputs  # pylint: disable=g-import-not-at-top
  data_dir, _ = data
  model_dir = run_copy
  # The model dir gives what its export/ (written from the live model) gives.
  rng = np.random.default_rng(0)
  ids = rng.integers(104, 1000, [2, 16]).astype(np.int32)
  np.savez(tmp_path / "in.npz", input_ids=ids, input_mask=np.ones_like(ids),
           segment_ids=np.zeros_like(ids))
  outputs = {}
  for source in ("run", "run/export"):
    out = tmp_path / f"{source.replace('/', '_')}.npz"
    assert reference_outputs.main(["--checkpoint", str(tmp_path / source), "--inputs",
                                   str(tmp_path / "in.npz"), "--output", str(out)]) == 0
    outputs[source] = np.load(out)
    assert export_hf.main(["--checkpoint", str(tmp_path / source), "--output",
                           str(tmp_path / "hf" / source)]) == 0
  assert sorted(outputs["run"]) == sorted(outputs["run/export"]) == [
      "discriminator_hidden", "discriminator_logits", "generator_hidden",
      "generator_logits"]
  for name in outputs["run"]:
    np.testing.assert_array_equal(outputs["run"][name], outputs["run/export"][name])
  assert (tmp_path / "hf" / "run" / "model.safetensors").read_bytes() == (
      tmp_path / "hf" / "run/export" / "model.safetensors").read_bytes()
  # --init-checkpoint of a new run: the model dir's newest checkpoint.
  capsys.readouterr()
  assert run_pretraining.main(script_args(data_dir, tmp_path / "continued",
                                          init_checkpoint=str(model_dir),
                                          init_scheme="mimetic")) == 0
  assert (f"initialized the generator and discriminator from {model_dir}/ckpt-4\n"
          "note: init_scheme mimetic does not apply: every weight comes from "
          "init_checkpoint (pretrain_config.json records the start)\n"
          in capsys.readouterr().out)
  record = json.loads((tmp_path / "continued" / run_record.RUN_CONFIG).read_text())
  # Named as every run record names a start (runs/start.py): its location.
  assert record["start"] == {"init_checkpoint": f"{model_dir}/ckpt-4"}
  assert json.loads((model_dir / run_record.RUN_CONFIG).read_text())["start"] == {
      "init_scheme": "truncated_normal"}


def test_discriminator_settings_the_run_cannot_carry_out_are_warned_of(data_dir, capsys):
  cases = [({"num_train_steps": 100, "disc_warmup_steps": 400},
            "warning: disc_warmup_steps 400 is longer than num_train_steps 100: the "
            "discriminator's learning rate ends at 25% of its warmup\n"),
           ({"num_train_steps": 100, "disc_warmup_steps": 100}, ""),
           ({"objective": "masked_lm", "disc_lr_multiplier": 2.0},
            "warning: disc_lr_multiplier 2: objective masked_lm has no discriminator, so "
            "this does nothing (its one rate is learning_rate)\n"),
           ({"objective": "masked_lm", "disc_lr_multiplier": 0.5, "disc_warmup_steps": 5},
            "warning: disc_lr_multiplier 0.5, disc_warmup_steps 5: objective masked_lm "
            "has no discriminator, so these do nothing (its one rate is learning_rate)\n"),
           ({"objective": "masked_lm"}, "")]
  for overrides, warned in cases:
    config_fitting.checked_and_sized(config_for(data_dir, "x", **overrides))
    assert capsys.readouterr().err == warned, overrides
