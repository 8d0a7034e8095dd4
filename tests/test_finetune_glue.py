"""End-to-end fine-tuning: every GLUE task from a tiny pre-trained checkpoint, eval-only
reload, a user's own task through the script, and sentence-pair featurization."""

import gc
import json
import os
import weakref

import numpy as np
import pytest
import tensorflow as tf

from data_prep.tokenizer import Tokenizer
from data_prep.vocab import load_vocab
from finetune import config as finetune_config
from finetune import trainer
from finetune.sentence import data as sentence_data
from finetune.sentence.data import SentenceExample
from runs.pretrained import open_weights
from model import flops as model_flops
from model.config import ModelConfig
from model.electra import ElectraPair
from tests.helpers import (head_of, run_lock_held_elsewhere, sentence, shared_path,
                           save_original, write_reviews_task,
                           write_tiny_pretrained_model)
from training.curves import LOG_NAME, read_log


def write_tsv(path, rows):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    f.writelines("\t".join(map(str, r)) + "\n" for r in rows)


ROWS = 30  # of each GLUE file cut short, and of each task's training file written here


def glue_data_dir(tmp_path):
  """Shared GLUE tasks cut to their first rows; the rest written here in GLUE's format."""
  data = tmp_path / "data"
  root = data / "finetuning_data"
  for folder in ("CoLA", "SST-2", "MRPC", "STS-B", "RTE"):
    for split in ("train", "dev", "test"):
      head_of(shared_path("glue", folder, f"{split}.tsv"), root / folder / f"{split}.tsv",
              ROWS + 1)
  rng = np.random.default_rng(0)
  pairs = lambda n, labels: [(sentence(rng), sentence(rng), rng.choice(list(labels)))
                             for _ in range(n)]
  mnli = ["entailment", "neutral", "contradiction"]
  parse = ["(x)", "(y)", "(X)", "(Y)"]
  head = ["index", "promptID", "pairID", "genre", "s1bp", "s2bp", "s1p", "s2p",
          "sentence1", "sentence2"]
  write_tsv(root / "MNLI" / "train.tsv", [head + ["label1", "gold_label"]] + [
      [i, 1, 2, "fiction", *parse, a, b, l, l]
      for i, (a, b, l) in enumerate(pairs(ROWS, mnli))])
  for kind in ("matched", "mismatched"):
    write_tsv(root / "MNLI" / f"dev_{kind}.tsv",
              [head + ["label1", "label2", "label3", "label4", "label5", "gold_label"]] +
              [[i, 1, 2, "fiction", *parse, a, b, l, l, l, l, l, l]
               for i, (a, b, l) in enumerate(pairs(20, mnli))])
    write_tsv(root / "MNLI" / f"test_{kind}.tsv", [head] + [
        [i, 1, 2, "fiction", *parse, a, b] for i, (a, b, _) in enumerate(pairs(15, mnli))])
  write_tsv(root / "diagnostic" / "diagnostic.tsv", [["index", "sentence1", "sentence2"]] +
            [[i, a, b] for i, (a, b, _) in enumerate(pairs(12, mnli))])
  write_tsv(root / "QQP" / "train.tsv",
            [["id", "qid1", "qid2", "question1", "question2", "is_duplicate"]] +
            [[i, 2 * i, 2 * i + 1, a, b, l] for i, (a, b, l) in enumerate(pairs(ROWS, "01"))])
  write_tsv(root / "QQP" / "dev.tsv",
            [["id", "qid1", "qid2", "question1", "question2", "is_duplicate"]] +
            [[i, 2 * i, 2 * i + 1, a, b, l] for i, (a, b, l) in enumerate(pairs(20, "01"))])
  write_tsv(root / "QQP" / "test.tsv", [["id", "question1", "question2"]] +
            [[i, a, b] for i, (a, b, _) in enumerate(pairs(15, "01"))])
  for folder, labels, columns in (
      ("QNLI", ["entailment", "not_entailment"], ["index", "question", "sentence"]),
      ("WNLI", ["0", "1"], ["index", "sentence1", "sentence2"])):
    for split, n in (("train", ROWS), ("dev", 20)):
      write_tsv(root / folder / f"{split}.tsv", [columns + ["label"]] +
                [[i, a, b, l] for i, (a, b, l) in enumerate(pairs(n, labels))])
    write_tsv(root / folder / "test.tsv", [columns] +
              [[i, a, b] for i, (a, b, _) in enumerate(pairs(15, labels))])
  write_tiny_pretrained_model(data)
  return data


ALL_GLUE = ["glue/cola", "glue/sst2", "glue/mrpc", "glue/stsb", "glue/qqp", "glue/mnli",
            "glue/qnli", "glue/rte", "glue/wnli", "glue/ax"]


@pytest.mark.slow
def test_every_glue_task_trains_evaluates_predicts_and_reloads(tmp_path):
  data = glue_data_dir(tmp_path)
  overrides = {"train_batch_size": 16, "eval_batch_size": 16, "max_seq_length": 32,
               "num_train_epochs": 2.0, "write_test_outputs": True, "log_every_steps": 20,
               "export_serving": False}  # test_serving's (a multi-task export included)
  config = finetune_config.load_config("tiny", ALL_GLUE, str(data), overrides)
  logs = []
  report = trainer.run(config, log=logs.append)
  summary = report["summary"]
  expected = {"glue/cola dev mcc", "glue/sst2 dev accuracy", "glue/mrpc dev accuracy",
              "glue/mrpc dev f1", "glue/stsb dev spearman", "glue/stsb dev pearson",
              "glue/qqp dev accuracy", "glue/qqp dev f1",
              "glue/mnli dev_matched accuracy", "glue/mnli dev_mismatched accuracy",
              "glue/qnli dev accuracy", "glue/rte dev accuracy", "glue/wnli dev accuracy"}
  assert set(summary) == expected
  for key, value in summary.items():
    assert -100 <= value["median"] <= 100 and np.isfinite(value["median"]), key
  # Scores were taken after each of the 2 epochs, and the curve was drawn.
  assert [h["epoch"] for h in report["trials"][0]["history"]] == [1, 2]
  assert os.path.getsize(report["plot"]) > 1000
  results = json.loads(open(config.results_file("json")).read())
  assert results["summary"] == json.loads(json.dumps(summary))
  assert "glue/mnli dev_matched accuracy: median" in open(config.results_file("txt")).read()
  # GLUE submission files: one row per test example, labels from each task's set.
  out = os.path.join(config.results_dir, "test_predictions",
                     f"{config.tasks_label}_trial1")
  for name, rows, valid in (("CoLA.tsv", ROWS, {"0", "1"}), ("MNLI-m.tsv", 15, None),
                            ("AX.tsv", 12, {"entailment", "neutral", "contradiction"}),
                            ("STS-B.tsv", ROWS, None), ("QQP.tsv", 15, {"0", "1"})):
    lines = open(os.path.join(out, name)).read().splitlines()
    assert lines[0] == "index\tprediction" and len(lines) == rows + 1, name
    if valid:
      assert {l.split("\t")[1] for l in lines[1:]} <= valid, name
  # Eval-only: the saved fine-tuned model reproduces the scores.
  reload = finetune_config.load_config("tiny", ALL_GLUE, str(data),
                                       {**overrides, "do_train": False})
  again = trainer.run(reload, log=logs.append)
  for key, value in summary.items():
    assert again["summary"][key]["median"] == pytest.approx(value["median"], abs=1e-6)


@pytest.mark.slow
def test_custom_task_through_the_script(tmp_path, capsys):
  # The command's main in this process (tests/test_predict.py and
  # tests/test_write_failures.py run the script itself).
  import run_finetuning  # pylint: disable=g-import-not-at-top
  data = tmp_path / "data"
  write_reviews_task(tmp_path, 48)
  os.makedirs(data)
  (data / "vocab.txt").write_bytes(
      open(shared_path("vocab", "bert_uncased_vocab.txt"), "rb").read())
  assert run_finetuning.main(
      ["--task", str(tmp_path / "task.json"), "--data-dir", str(data), "--hparams",
       json.dumps({"debug": True, "train_batch_size": 8, "max_seq_length": 16,
                   "num_train_epochs": 1, "export_serving": False,
                   "write_curves": False})]) == 0
  assert "no pre-trained checkpoint" not in capsys.readouterr().err  # debug: random by design
  results = data / "models" / "electra_small" / "results" / "reviews_results.json"
  summary = json.loads(results.read_text())["summary"]
  assert list(summary) == ["reviews dev accuracy"]

  assert run_finetuning.main(
      ["--task", "glue/sst2",
       # TFDS cannot fetch the task into /proc, online or not.
       "--data-dir", str(data), "--hparams",
       '{"debug": true, "tfds_data_dir": "/proc/no_tfds"}']) == 2
  err = capsys.readouterr().err
  assert "Traceback" not in err and err.strip().splitlines()[-1].startswith("error: ")
  assert "SST-2" in err  # names the expected layout


def test_a_bad_dev_file_fails_before_training(tmp_path, capsys):
  import run_finetuning  # pylint: disable=g-import-not-at-top
  data = tmp_path / "data"
  folder = data / "finetuning_data" / "SST-2"
  for split in ("train", "dev"):
    head_of(shared_path("glue", "SST-2", f"{split}.tsv"), folder / f"{split}.tsv", 17)
  write_tiny_pretrained_model(data)
  dev = folder / "dev.tsv"
  rows = dev.read_text().splitlines(keepends=True)
  for line, problem in (
      (rows[3].rstrip("\n") + "\textra\n",
       "expected 2 tab-separated columns (glue/sst2 dev layout), found 3"),
      (rows[3].rsplit("\t", 1)[0] + "\tpositive\n",
       "unknown label 'positive' for glue/sst2; expected one of 0, 1")):
    dev.write_text("".join(rows[:3] + [line] + rows[4:]))
    assert run_finetuning.main(
        ["--task", "glue/sst2", "--model-name", "tiny", "--data-dir", str(data),
         "--hparams", '{"max_seq_length": 16, "train_batch_size": 4}']) == 2
    out = capsys.readouterr()
    assert out.err.splitlines()[-1] == f"error: {dev}:4: {problem}"
    assert "step" not in out.err + out.out  # no training step ran
    assert not os.path.exists(
        data / "models" / "tiny" / "finetuning_models" / "glue_sst2_model_1")


def test_pair_encoding_truncates_like_the_original():
  tokenizer = Tokenizer(load_vocab(shared_path("vocab", "bert_uncased_vocab.txt")))
  vocab = tokenizer.vocab.ids
  a = SentenceExample(0, "one two three four five six", "seven eight", None)
  single = SentenceExample(1, "one two three four five six", None, None)
  out = sentence_data.encode(tokenizer, [a, single], max_seq_length=8)
  ids = lambda words: [vocab[w] for w in words.split()]
  # Pair: 5 tokens fit; the longer text loses tokens first, B when they tie.
  assert out["input_ids"][0].tolist() == (
      [vocab["[CLS]"]] + ids("one two three") + [vocab["[SEP]"]] + ids("seven eight") +
      [vocab["[SEP]"]])
  assert out["segment_ids"][0].tolist() == [0] * 5 + [1] * 3
  assert out["input_ids"][1].tolist() == (
      [vocab["[CLS]"]] + ids("one two three four five six") + [vocab["[SEP]"]])
  assert out["input_mask"][1].tolist() == [1] * 8
  a_list, b_list = [1, 2, 3], [4, 5, 6]
  sentence_data.truncate_pair(a_list, b_list, 4)
  assert (a_list, b_list) == ([1, 2], [4, 5])


def test_vocab_size_mismatch_is_refused(tmp_path):
  data = tmp_path / "data"
  os.makedirs(data)
  (data / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
                                            "a", "b"]) + "\n")
  config = ModelConfig.from_dict(dict(vocab_size=30522, hidden_size=32,
                                      num_hidden_layers=1, embedding_size=16))
  save_original(ElectraPair(config).build_variables(),
                     str(data / "models" / "m" / "model.ckpt"))
  with pytest.raises(ValueError, match="holds 7 tokens but .* vocabulary of 30522"):
    trainer.Finetuner(finetune_config.load_config("m", ["glue/sst2"], str(data)))


@pytest.mark.slow
def test_resume_refuses_another_run_and_one_run_per_model_dir(tmp_path, capsys):
  import run_finetuning  # pylint: disable=g-import-not-at-top
  data = tmp_path / "data"
  data.mkdir()
  write_tiny_pretrained_model(data)
  task = write_reviews_task(tmp_path, 48)
  export = open_weights(str(data / "models" / "tiny" / "export")).location
  other = save_original(  # another pre-trained model of the same size
      ElectraPair(open_weights(export).model_config()).build_variables(),
      str(tmp_path / "other" / "model.ckpt"))
  model_dir = data / "models" / "tiny" / "finetuning_models" / "reviews_model"
  trial_dir = f"{model_dir}_1"

  def run(init="", **hparams):
    code = run_finetuning.main(
        ["--task", task, "--model-name", "tiny", "--data-dir", str(data),
         "--init-checkpoint", init, "--hparams", json.dumps(
             {"train_batch_size": 8, "max_seq_length": 16, "num_train_epochs": 1,
              "export_serving": False, "write_curves": False, **hparams})])
    return code, capsys.readouterr()

  code, out = run()
  assert code == 0, out.err
  saved = open(os.path.join(trial_dir, "finetuning_config.json")).read()
  refusal = (f"error: {trial_dir} holds a run with a different config ({{}}); use another "
             "model_dir, or set \"overwrite_model_dir\": true to delete that run, "
             "checkpoints included, and start over\n")
  assert run(init=other)[1].err == refusal.format(
      f"init_checkpoint: {os.path.abspath(export)!r} -> {os.path.abspath(other)!r}")
  assert run(learning_rate=1e-3)[1].err == refusal.format("learning_rate: 0.0003 -> 0.001")
  assert open(os.path.join(trial_dir, "finetuning_config.json")).read() == saved
  # --predict likewise: the trial's model is not one fine-tuned from that checkpoint.
  code = run_finetuning.main(["--task", task, "--model-name", "tiny", "--data-dir",
                              str(data), "--init-checkpoint", other, "--hparams",
                              '{"max_seq_length": 16}', "--predict",
                              str(tmp_path / "dev.csv")])
  assert (code, capsys.readouterr().err) == (
      2, f"error: --init-checkpoint {os.path.abspath(other)}: {trial_dir} was fine-tuned "
      f"from {os.path.abspath(export)} (its finetuning_config.json); give that one, or "
      "none\n")
  # Lost or emptied, the record is rebuilt from the copy the checkpoint carries, and
  # still guards the run.
  record = os.path.join(trial_dir, "finetuning_config.json")
  for problem, damage in (("is missing", lambda: os.remove(record)),
                          ("is empty", lambda: open(record, "w").write("{}"))):
    damage()
    code, out = run(learning_rate=1e-3)
    assert (code, out.err) == (2, refusal.format("learning_rate: 0.0003 -> 0.001"))
    assert (f"note: {record}, the run's record, {problem}; rebuilt it from the copy "
            "ckpt-6 carries\n") in out.out
    assert open(record).read() == saved
  # What does not change the weights may change: the run resumes (at its end).
  code, out = run(eval_batch_size=4)
  assert code == 0 and "resuming from" in out.out and "at step 6/6" in out.out

  # One run per model dir: refused while another process holds it, naming that process.
  with run_lock_held_elsewhere(model_dir) as holder:
    code, out = run()
    assert code == 2 and out.err.startswith(
        f"error: {model_dir} is in use by another run (pid {holder.pid}: ")

  # Told to, a run from the other checkpoint replaces the old one (and takes over the
  # killed holder's lock); what no run writes there stays.
  with open(os.path.join(trial_dir, "notes.txt"), "w") as f:
    f.write("mine")
  code, out = run(init=other, overwrite_model_dir=True)
  assert code == 0, out.err
  assert (f"overwrite_model_dir: deleting the previous run in {trial_dir}\nnote: kept "
          f"what no run writes in {trial_dir}: notes.txt\n") in out.out
  assert open(os.path.join(trial_dir, "notes.txt")).read() == "mine"
  assert "taking over the lock" in out.out and "resuming" not in out.out
  signature = json.loads(open(os.path.join(trial_dir, "finetuning_config.json")).read())[
      "signature"]
  assert signature["init_checkpoint"] == os.path.abspath(other)

  # A folder of other files is no trial's model dir; nor is the data dir.
  mine = tmp_path / "mine_1"
  mine.mkdir()
  (mine / "notes.txt").write_text("mine")
  own = ("; a run's model dir is a folder of its own: give another --model-name or "
         "model_dir\n")
  assert run(model_dir=str(tmp_path / "mine"))[1].err == (
      f"error: {mine} holds no run (finetuning_config.json), and what no run "
      f"writes (notes.txt){own}")
  os.symlink(data, tmp_path / "link_1")
  assert run(model_dir=str(tmp_path / "link"))[1].err == (
      f"error: the model dir {tmp_path}/link_1 is the data dir ({data}){own}")


@pytest.mark.slow
def test_float16_uses_loss_scaling_and_only_the_last_trial_is_kept(tmp_path):
  # Two steps a trial: float16 arithmetic is emulated on a CPU, many times slower.
  task = write_reviews_task(tmp_path, 16)
  (tmp_path / "data").mkdir()
  write_tiny_pretrained_model(tmp_path / "data")
  overrides = { "train_batch_size": 8, "max_seq_length": 16,
               "mixed_precision": "mixed_float16", "num_trials": 2,
               "keep_all_models": False, "num_train_epochs": 1.0, "write_curves": False}
  config = finetune_config.load_config("tiny", [task], str(tmp_path / "data"), overrides)
  messages = []
  report = trainer.run(config, log=messages.append)
  assert not os.path.exists(f"{config.model_dir}_1")  # deleted once scored
  # Only the kept trial is exported for serving (trial 1's export would be deleted).
  assert [m for m in messages if "serving SavedModel" in m] == [
      f"wrote the serving SavedModel {config.model_dir}_2/saved_model"]
  assert os.path.isdir(f"{config.model_dir}_2/saved_model")
  checkpoint = tf.train.latest_checkpoint(f"{config.model_dir}_2")
  names = [name for name, _ in tf.train.list_variables(checkpoint)]
  # The optimizer was a LossScaleOptimizer: its dynamic loss scale is checkpointed.
  assert any("loss_scale/current_loss_scale" in name for name in names), names[:20]
  assert all(np.isfinite(t["scores"]["reviews dev"]["accuracy"]) for t in report["trials"])
  # Training FLOPs in the original's convention: 2 x the encoder's forward per example.
  log = read_log(os.path.join(f"{config.model_dir}_2", LOG_NAME))
  step = max(log)
  model = open_weights(str(tmp_path / "data" / "models" / "tiny" / "export")).model_config(
      "discriminator")
  assert log[step]["train_flops"] == pytest.approx(
      step * 2 * 8 * model_flops.inference_flops(model, 16))


# A user's task with a test split, trained at seed 0 (one trial), its test predictions
# written: the resume test's batch and length (one compilation of the fused layers,
# model/fused.py, per shape serves both).
SEED_0 = {"max_seq_length": 16, "train_batch_size": 8, "num_train_epochs": 1.0,
          "write_test_outputs": True, "export_serving": False, "do_eval": False,
          "write_curves": False, "seed": 0}


@pytest.fixture(scope="module")
def seed_0_run(tmp_path_factory):
  """(its task file, data dir, config) of a run of SEED_0 on a user's task of 16 rows
  with a test split, which two tests read."""
  folder = tmp_path_factory.mktemp("seed_0_run")
  data = folder / "data"
  data.mkdir()
  write_tiny_pretrained_model(data)
  task = write_reviews_task(folder, 16)
  spec = json.loads(open(task, encoding="utf-8").read())
  (folder / "test.csv").write_text("id,review\n" + "\n".join(
      f"t{i},a film {i}" for i in range(5)))
  (folder / "task.json").write_text(json.dumps({**spec, "test": "test.csv"}))
  config = finetune_config.load_config("tiny", [task], str(data), SEED_0)
  trainer.run(config, log=lambda _: None)
  return task, data, config


@pytest.mark.slow
def test_a_users_task_writes_its_test_predictions(seed_0_run):
  """write_test_outputs on a user's task with a test split: its predictions as JSON
  lines (GLUE's tasks write their submission files), not predicted and dropped."""
  _, _, config = seed_0_run
  out = os.path.join(config.results_dir, "test_predictions", "reviews_trial1",
                     "reviews_test.jsonl")
  rows = [json.loads(line) for line in open(out, encoding="utf-8")]
  assert [r["index"] for r in rows] == list(range(5))  # the test rows, in order
  assert all(r["label"] in ("bad", "good") and set(r["probabilities"]) == {"bad", "good"}
             for r in rows)


@pytest.mark.slow
def test_trial_seeds_wrap_round_to_0_past_the_largest_seed(tmp_path, seed_0_run):
  """Trials take seed, seed + 1, ...: past the largest seed, the next trial's is 0 and
  it trains as a run of seed 0 does (seed_0_run's), step for step (not a seeding error
  once the first trial is done)."""
  task, data, seed_0 = seed_0_run
  config = finetune_config.load_config(
      "tiny", [task], str(data), {**SEED_0, "seed": 4294967295, "num_trials": 2,
                                  "model_dir": str(tmp_path / "last"),
                                  "results_dir": str(tmp_path / "last_results")})
  trainer.run(config, log=lambda _: None)
  last, first = config.model_dir, seed_0.model_dir
  losses = [{step: row["loss"] for step, row in read_log(
      os.path.join(model_dir, LOG_NAME)).items()} for model_dir in (f"{last}_2",
                                                                    f"{first}_1")]
  assert losses[0] and losses[0] == losses[1]
  assert losses[0] != {step: row["loss"] for step, row in read_log(
      os.path.join(f"{last}_1", LOG_NAME)).items()}


def test_a_finished_trials_model_is_released(tmp_path, monkeypatch):
  """The compiled predict call the trainer keeps per model once kept every trial's
  model alive (keyed by id), and with it its weights, to the run's end."""
  data = tmp_path / "data"
  data.mkdir()
  write_tiny_pretrained_model(data)
  task = write_reviews_task(tmp_path, 16)
  # The resume test's batch and length: one compilation of the fused layers.
  config = finetune_config.load_config(
      "tiny", [task], str(data), {"max_seq_length": 16, "train_batch_size": 8,
                                  "num_train_epochs": 1.0, "export_serving": False,
                                  "write_curves": False})
  finetuner = trainer.Finetuner(config, log=lambda _: None)
  finetuner.read_splits()
  models, train_loop = [], finetuner.train_loop

  def train_loop_seen(*args, **kwargs):
    loop = train_loop(*args, **kwargs)
    models.append(weakref.ref(loop.train_step.model))
    return loop
  monkeypatch.setattr(finetuner, "train_loop", train_loop_seen)
  scores = finetuner.run_trial(1)["scores"]  # scored: predict compiled its call
  gc.collect()
  assert "reviews dev" in scores and len(models) == 1 and models[0]() is None
