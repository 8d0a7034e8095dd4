"""experiments.compute_efficiency end to end on a tiny budget, its judges and fine-tuning data.

The driver runs on a shared-data mirror whose corpus is cut to a few thousand lines and
RTE's dev set to 32 rows (the rest is linked): both pre-training arms at equal FLOPs (each
arm's per step equal to tools.flops' count, the original's), their exports at 1/8 and all
of the run (--fractions; the default adds 1/4 and 1/2), five encoders fine-tuned on RTE by
the short judge (each arm's in one process, experiments.finetuning_runs), the table, JSON
and plot; a second run, as a subprocess (`python -m
experiments.compute_efficiency` from the root), skips every unit. The other runs call its
main() here: its units are processes of their own either way, and a process of the driver
would only load TensorFlow again. The original judge runs on given encoders (random
weights and a Hugging Face BERT directory) with a rate grid; its schedule is checked
against the original's recipe (its epochs per task, both orders for MRPC and STS-B), and
its choice of rate by dev median.
"""

import argparse
import json
import math
import os
import signal
import subprocess
import sys

import pytest

from experiments import compute_efficiency, finetuning_runs
from tests.helpers import bert_dir, shared_path
from tools import flops as flops_tool

STUDY = [sys.executable, "-m", "experiments.compute_efficiency"]

FRACTIONS = ("1/8", "1")
ENCODERS = [f"{arm}@{f}" for arm in ("electra", "mlm") for f in FRACTIONS] + ["random"]


RTE_DEV_ROWS = 32  # each fine-tuning run's evaluation: the whole dev set, cut here


def first_lines(path, count: int) -> str:
  with open(path, encoding="utf-8") as f:
    return "".join(next(f) for _ in range(count))


def shared_mirror(tmp_path, corpus_lines: int):
  """A --shared-data folder: the real data linked, the corpus cut to its first lines and
  RTE's dev set to its first RTE_DEV_ROWS rows."""
  mirror = tmp_path / "shared"
  (mirror / "corpus").mkdir(parents=True)
  for name in ("conll2000", "squad"):
    os.symlink(shared_path(name), mirror / name)
  rte = mirror / "glue" / "RTE"
  rte.mkdir(parents=True)
  for folder in os.listdir(shared_path("glue")):
    if folder != "RTE":
      os.symlink(shared_path("glue", folder), mirror / "glue" / folder)
  for name in os.listdir(shared_path("glue", "RTE")):
    if name != "dev.tsv":
      os.symlink(shared_path("glue", "RTE", name), rte / name)
  (rte / "dev.tsv").write_text(first_lines(shared_path("glue", "RTE", "dev.tsv"),
                                           1 + RTE_DEV_ROWS), encoding="utf-8")
  (mirror / "corpus" / "english_corpus.txt").write_text(
      first_lines(shared_path("corpus", "english_corpus.txt"), corpus_lines),
      encoding="utf-8")
  return mirror


# The debug preset cut to one layer (pre-training's arms and the random encoder alike):
# nothing the tests assert depends on the depth, and every model traces and runs less.
ONE_LAYER = '"model_hparam_overrides": {"num_hidden_layers": 1}'


def study_flags(mirror, work):
  return [
      "--work-dir", str(work), "--shared-data", str(mirror), "--model-size", "debug",
      "--vocab-size", "2000", "--budget-steps", "8", "--max-train-examples", "64",
      "--trials", "1", "--tasks", "glue/rte", "--judge", "short",
      "--fractions", ",".join(FRACTIONS),
      "--pretrain-hparams", '{"train_batch_size": 8, "num_warmup_steps": 2, %s}' % ONE_LAYER,
      "--mlm-hparams", '{"learning_rate": 3e-4}',
      "--finetune-hparams", '{"num_train_epochs": 1, "max_seq_length": 64, %s}' % ONE_LAYER]


def run_in_process(capsys, *flags):
  """compute_efficiency.main(flags) in this process: (exit code, stdout, stderr). The
  driver's own work needs no process of its own (its units still run in theirs), and
  TensorFlow, which it imports to plan, is loaded here already."""
  capsys.readouterr()
  sigterm = signal.getsignal(signal.SIGTERM)  # main() makes SIGTERM stop as Ctrl-C does
  try:
    code = compute_efficiency.main(list(flags))
  except SystemExit as e:  # a refusal: fail()'s exit
    code = e.code
  finally:
    signal.signal(signal.SIGTERM, sigterm)
  out, err = capsys.readouterr()
  return code, out, err


def numbers(value):
  if isinstance(value, dict):
    return [n for v in value.values() for n in numbers(v)]
  if isinstance(value, list):
    return [n for v in value for n in numbers(v)]
  return [value] if isinstance(value, float) else []


@pytest.mark.slow
def test_tiny_study_end_to_end_then_resumes_without_running(tmp_path, capsys):
  mirror, work = shared_mirror(tmp_path, 3000), tmp_path / "study"
  code, out, err = run_in_process(capsys, *study_flags(mirror, work))
  assert code == 0, out[-3000:] + err[-3000:]
  for name in ("results.md", "results.json", "scores_vs_flops.png", "timings.json"):
    assert (work / name).stat().st_size > 0, name

  table = (work / "results.md").read_text().splitlines()
  header = table[0]
  for encoder in ENCODERS:
    assert f"| {encoder} " in header, (encoder, header)
  assert any(row.startswith("| glue/rte | accuracy |") for row in table)
  assert any(row.startswith("| GLUE avg") for row in table)

  results = json.loads((work / "results.json").read_text())
  electra, mlm = results["arms"]["electra"], results["arms"]["mlm"]
  assert electra["num_train_steps"] == 8 and mlm["num_train_steps"] > 8  # cheaper steps
  assert abs(mlm["train_flops_total"] - electra["train_flops_total"]) <= \
      mlm["train_flops_per_step"]
  assert all(math.isfinite(n) for n in numbers(results))
  assert all(results["encoders"][e]["glue_avg"] is not None for e in ENCODERS)
  assert [results["encoders"][f"electra@{f}"]["step"] for f in FRACTIONS] == [1, 8]
  # Each arm's FLOPs per step are the original's count, as tools.flops gives it for
  # the arm's own settings.
  for arm, spec in results["arms"].items():
    hparams = json.loads((work / "plan.json").read_text())["plan"]["arms"][arm]["hparams"]
    capsys.readouterr()
    assert flops_tool.main(["--model-name", spec["model_name"], "--data-dir", str(work),
                            "--hparams", json.dumps(hparams), "--json"]) == 0
    assert spec["train_flops_per_step"] == json.loads(capsys.readouterr().out)[
        "train_flops_per_step"], arm
  # --mlm-hparams reach the masked-LM arm's run only.
  arms = json.loads((work / "plan.json").read_text())["plan"]["arms"]
  assert arms["mlm"]["hparams"]["learning_rate"] == 3e-4
  assert "learning_rate" not in arms["electra"]["hparams"]
  records = {arm: json.loads((work / "models" / f"{arm}_debug" / "pretrain_config.json"
                              ).read_text())["config"] for arm in ("electra", "mlm")}
  assert records["mlm"]["learning_rate"] == 3e-4 != records["electra"]["learning_rate"]
  # Each arm's encoders were fine-tuned in one process: a unit (and its log) per arm.
  assert sorted(p.name for p in (work / "logs").glob("finetune_*")) == [
      f"finetune_{arm}_glue-rte.log" for arm in ("electra", "mlm", "random")]
  # Scores only: no fine-tuned model is exported for serving (export_serving false),
  # and no fine-tuning curves are drawn (write_curves false); pre-training's are.
  assert not list(work.glob("models/**/saved_model"))
  assert not list(work.glob("results/**/*.png"))
  assert sorted(p.parent.name for p in work.glob("models/**/*.png")) == [
      "electra_debug", "mlm_debug"]

  # A kept training checkpoint exported on its own: the weights of step 1, not 8.
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  exports = work / "models" / "electra_debug" / "export"
  read = lambda path: tf.train.load_checkpoint(str(path)).get_tensor(
      "electra/embeddings/word_embeddings")
  assert (read(exports / "step_1") != read(exports)).any()

  # A finished study only re-prints its results: every unit is skipped, none runs. As
  # `python -m`, the script's run as a process in the suite.
  second = subprocess.run([*STUDY, *study_flags(mirror, work)], capture_output=True,
                          text=True, timeout=600)
  assert second.returncode == 0, second.stderr[-3000:]
  timings = json.loads((work / "timings.json").read_text())
  # Data, two arms, and per arm (random's too) one fine-tuning unit for the one task.
  assert len(timings) == 1 + 2 + 3
  assert {t["status"] for t in timings.values()} == {"skipped"}
  assert "GLUE avg" in second.stdout
  # Other points judged are other settings of the study: refused, not mixed in. This and
  # --table start no unit: in-process.
  flags = study_flags(mirror, work)
  at = flags.index("--fractions") + 1
  code, _, err = run_in_process(capsys, *flags[:at], "1/2,1", *flags[at + 1:])
  assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
  assert "other settings (fractions)" in err

  code, out, _ = run_in_process(capsys, "--table", "--judge", "short", "--work-dir",
                                str(work))
  assert code == 0 and out.strip() == "\n".join(table)


def test_other_settings_in_the_same_work_dir_and_bad_flags_fail_in_one_line(tmp_path,
                                                                           capsys):
  work = tmp_path / "study"
  work.mkdir()
  (work / "plan.json").write_text(json.dumps({"settings": {"trials": 5}, "plan": {},
                                              "tasks": []}))
  bad = [["--tasks", "glue/nope"], ["--trials", "0"], ["--pretrain-hparams", "[1]"],
         ["--model-size", "nope"], ["--shared-data", str(tmp_path)], ["--jobs", "x"],
         ["--fractions", "1/3"],
         ["--shared-data", shared_path()]]
  # In-process: refusals start no unit (test_the_judges_bad_flags_fail_in_one_line runs
  # them as processes).
  for flags in bad:
    code, _, err = run_in_process(capsys, "--work-dir", str(work), *flags)
    assert code == 2, flags
    assert err.startswith("error: ") and err.count("\n") == 1, (flags, err)
  assert "other settings" in err


@pytest.mark.parametrize("text", ["", "0", "1/3", "9/8", "1/2,2/4", "x", "1/0"])
def test_fractions_are_distinct_eighths_of_the_run(text):
  with pytest.raises(argparse.ArgumentTypeError):
    compute_efficiency.fraction_list(text)


def test_fractions_are_named_as_the_encoders_are():
  assert compute_efficiency.fraction_list("1, 2/8,1/8 ,6/8") == ["1/8", "1/4", "3/4", "1"]


def test_finetuning_data_keeps_headers_and_quirks_and_cuts_train_files(tmp_path):
  caps = {t: 5 for t in compute_efficiency.SCHEDULES}
  args = type("Args", (), dict(home=str(tmp_path), shared_data=shared_path(),
                               caps=caps, squad_train_articles=38))
  compute_efficiency.write_finetuning_data(args)
  data = tmp_path / "finetuning_data"
  source = lambda *p: open(shared_path(*p), "rb").read()
  for folder, header in (("CoLA", 0), ("SST-2", 1), ("MRPC", 1), ("STS-B", 1),
                         ("RTE", 1)):
    train = (data / folder / "train.tsv").read_bytes()
    assert train.count(b"\n") == 5 + header
    assert source("glue", folder, "train.tsv").startswith(train)  # BOM, header, rows
    # Real paths on both sides: ../shared is itself a symbolic link on many machines.
    assert os.path.realpath(data / folder / "dev.tsv") == os.path.realpath(
        shared_path("glue", folder, "dev.tsv"))
  chunk = (data / "chunk" / "train.txt").read_text()
  assert chunk.count("\n\n") == 5 and chunk.endswith("\n\n")  # 5 sentences, whole
  squad = json.loads((data / "squadv1" / "train.json").read_text())
  assert sum(len(p["qas"]) for a in squad["data"] for p in a["paragraphs"]) == 5
  dev = json.loads((data / "squadv1" / "dev.json").read_text())
  assert len(dev["data"]) == 48 - 38


# The original's fine-tuning recipe (the paper's appendix): 3 epochs, 10 for RTE
# and STS-B; MRPC and STS-B train on both sentence orders.
ORIGINAL_EPOCHS = {"glue/sst2": 3, "glue/cola": 3, "glue/mrpc": 3, "glue/stsb": 10,
                   "glue/rte": 10, "chunk": 3}


def test_the_original_judge_follows_the_original_recipe_the_same_for_every_task():
  args = compute_efficiency.parse_args(["--shared-data", shared_path()])
  assert args.judge == "original"
  assert set(compute_efficiency.JUDGED_TASKS) == set(ORIGINAL_EPOCHS)
  assert args.lr_grid == [1e-4, 3e-4, 1e-3]
  # Whole training sets but SST-2's first 20,000 examples.
  assert {t: c for t, c in args.caps.items() if t in ORIGINAL_EPOCHS} == {
      t: 20000 if t == "glue/sst2" else 0 for t in ORIGINAL_EPOCHS}
  for task, epochs in ORIGINAL_EPOCHS.items():
    config = compute_efficiency.run_config(args, task)
    assert config.num_train_epochs == epochs, task
    if task == "chunk":
      assert "sentence" not in config.sections  # a tagging run holds no sentence section
    else:
      assert config.sections["sentence"].double_unordered
    assert config.num_trials == 3, task  # chunking too
    assert config.max_seq_length == compute_efficiency.SCHEDULES[task]["max_seq_length"]
    assert config.learning_rate == 1e-4  # the grid's first
  # A reduced judge: every set cut to --max-train-examples, SST-2 to its own cap.
  reduced = compute_efficiency.parse_args(["--shared-data", shared_path(),
                                           "--max-train-examples", "1000"])
  assert set(reduced.caps.values()) == {1000}
  reduced = compute_efficiency.parse_args(["--shared-data", shared_path(),
                                           "--max-train-examples", "1000", "--sst2-cap",
                                           "4000"])
  assert reduced.caps["glue/sst2"] == 4000 and reduced.caps["glue/stsb"] == 1000
  # The short judge stays as it was: one epoch, one seed on chunking.
  short = compute_efficiency.parse_args(["--shared-data", shared_path(), "--judge",
                                         "short"])
  assert short.lr_grid is None and short.caps["glue/sst2"] == 4000
  config = compute_efficiency.run_config(short, "chunk")
  assert (config.num_train_epochs, config.num_trials) == (1.0, 1)


def test_the_rate_is_chosen_by_the_dev_median_over_seeds():
  # By the mean, or the best seed, 1e-4 would win; its median is the lowest.
  trials = {1e-4: [90.0, 50.9, 51.0], 3e-4: [60.0, 61.0, 59.0], 1e-3: [50.9, 50.9, 70.0]}
  assert compute_efficiency.choose_lr(trials) == 3e-4
  assert compute_efficiency.choose_lr({1e-4: [1.0, 2.0], 3e-4: [2.0, 1.0]}) == 1e-4


@pytest.mark.slow
def test_the_original_judge_on_given_encoders(tmp_path, capsys):
  """Random weights and a BERT directory, a two-rate grid, two seeds; RTE's 64 examples
  make 2 batches, x 1 epoch here (its 10 are checked above) = 2 steps a run."""
  mirror, work = shared_mirror(tmp_path, 3000), tmp_path / "judged"
  bert = tmp_path / "bert"
  bert_dir(bert)
  code, out, err = run_in_process(
      capsys, "--work-dir", str(work), "--shared-data", str(mirror), "--model-size",
      "debug", "--vocab-size", "2000", "--max-train-examples", "64", "--trials", "2",
      "--lr-grid", "3e-4,1e-3", "--tasks", "glue/rte", "--encoders", f"random,bert={bert}",
      "--finetune-hparams", '{"num_train_epochs": 1, "max_seq_length": 32, %s}' % ONE_LAYER)
  assert code == 0, out[-3000:] + err[-3000:]
  assert ("the original judge: (glue/rte 2) steps x 2 seeds x 2 rates = 8 fine-tuning "
          "steps per encoder; 16 for the 2 encoders") in out
  assert "pretrain" not in out  # given encoders: no pre-training
  home = work / "judge_original"
  results = json.loads((home / "results.json").read_text())
  for encoder in ("random", "bert"):
    spec = results["encoders"][encoder]
    rte = spec["tasks"]["glue/rte"]["accuracy"]
    assert len(rte["trials"]) == 2
    rates = spec["lr"]["glue/rte"]
    assert rates["chosen"] in (3e-4, 1e-3) and sorted(rates["accuracy"]) == ["0.0003",
                                                                          "0.001"]
    assert rte["median"] == rates["accuracy"][f"{rates['chosen']:g}"] == max(
        rates["accuracy"].values())
  table = (home / "results.md").read_text()
  assert "| glue/rte | rate (best dev median) |" in table
  assert "| glue/rte | accuracy median by rate | 0.0003: " in table
  # Every seed at every rate of an arm's encoders ran in one process (given encoders
  # are an arm of their own); only scores were kept.
  logs = sorted(p.name for p in (work / "logs").glob("judge_*"))
  assert logs == ["judge_given_glue-rte.log", "judge_random_glue-rte.log"]
  log = (work / "logs" / logs[0]).read_text()
  assert "run 1/2: run_finetuning.py" in log and "run 2/2: run_finetuning.py" in log
  assert not list(home.glob("models/*/finetuning_models/*_model_1"))
  # The judges' results never mix: the short judge has none here.
  assert not (work / "results").exists()
  code, _, err = run_in_process(capsys, "--table", "--judge", "short", "--work-dir",
                                str(work))
  assert code == 2 and err == f"error: {work}: no results of the short judge here yet\n"
  code, out, _ = run_in_process(capsys, "--table", "--work-dir", str(work))
  assert code == 0 and out.strip() == table.strip()


def test_a_unit_skips_runs_with_results_and_goes_on_past_a_failed_one(tmp_path, capsys):
  done = tmp_path / "done.json"
  done.write_text("{}")
  bad = lambda task: {"argv": ["--task", task, "--data-dir", str(tmp_path)],
                      "results": str(tmp_path / f"{task}.json")}
  runs = [{**bad("nope1"), "results": str(done)}, bad("nope2"), bad("nope3")]
  assert finetuning_runs.main([json.dumps(runs)]) == 1
  out, err = capsys.readouterr()
  assert out.startswith(f"run 1/3: skipped, {done} exists\nrun 2/3: run_finetuning.py")
  assert "run 3/3: run_finetuning.py --task nope3" in out  # after run 2 failed
  assert [line.split(":")[0] for line in err.splitlines()] == ["error", "error"], err
  assert "nope2" in err.splitlines()[0] and "nope3" in err.splitlines()[1]


@pytest.mark.parametrize("flags", [["--judge", "short", "--lr-grid", "1e-4"],
                                   ["--lr-grid", "1e-4,1e-4"], ["--tasks", "squad/v1.1"],
                                   ["--encoders", "minilm"],
                                   ["--finetune-hparams", '{"learning_rate": 1e-4}']])
def test_the_judges_bad_flags_fail_in_one_line(tmp_path, flags):
  result = subprocess.run([*STUDY, "--work-dir", str(tmp_path), *flags],
                          capture_output=True, text=True, timeout=60)
  assert result.returncode == 2, flags
  assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, \
      (flags, result.stderr)
