"""`python -m tools.*`, `bench.*` and `experiments.*` flags are checked as the main
commands' are: at parse time, by the hyperparameters' rules (util/hparams.py), one line
naming the flag, the value and what is expected, before anything is read or written. A
bench's failing child process is one line too."""

import json
import os

import pytest

from bench import ROOT, bench_bf16, bench_data_prep, bench_islands, bench_memory
from bench import bench_multi_worker, bench_pretraining, bench_qa_memory, child
from tools import export_hf, flops, reference_outputs, replaced_tokens, tokenize
from util import cli


CASES = [
    (replaced_tokens.main, ["--checkpoint", "c", "--text", "t", "--corrupt", "--seed",
                            "-1"], "--seed -1: expected an integer in [0, 4294967295]"),
    # A seed past NumPy's and TensorFlow's: its range, not their out-of-range error.
    (replaced_tokens.main, ["--checkpoint", "c", "--text", "t", "--corrupt", "--seed",
                            "99999999999999999999"],
     "--seed 99999999999999999999: expected an integer in [0, 4294967295]"),
    (replaced_tokens.main, ["--checkpoint", "", "--text", "t"],
     "--checkpoint '': expected a path"),
    (export_hf.main, ["--checkpoint", "c", "--output", ""], "--output '': expected a path"),
    (tokenize.main, ["--vocab-file", "v", "--input", "i", "--output", " "],
     "--output ' ': expected a path"),
    (reference_outputs.main, ["--checkpoint", "c", "--inputs", "i", "--output", ""],
     "--output '': expected a path"),
    (flops.main, ["--output-frac", "0"], "--output-frac 0.0: expected a number in (0, 1]"),
    (flops.main, ["--output-frac", "1.5"], "--output-frac 1.5: expected a number in "
     "(0, 1]"),
    # The benches: a bad number, file or list, which ended in a traceback, no output at
    # all, or a child's traceback inside the JSON.
    (bench_pretraining.main, ["--steps", "0"], "--steps 0: expected an integer >= 1"),
    (bench_pretraining.main, ["--rounds", "-1"], "--rounds -1: expected an integer >= 1"),
    (bench_pretraining.main, ["--vocab-file", "none.txt"],
     "--vocab-file none.txt: no such file; expected a file"),
    (bench_pretraining.main, ["--impls", "ours,tf"],
     "argument --impls: 'tf': expected a comma-separated list of ours, ours_unfused, hf"),
    (bench_bf16.main, ["--rounds", "0"], "--rounds 0: expected an integer >= 1"),
    (bench_memory.main, ["--steps", "0"], "--steps 0: expected an integer >= 1"),
    (bench_memory.main, ["--task", "squad", "--variants", "autodiff_gelu"],
     "--variants autodiff_gelu is measured for --task pretraining only"),
    (bench_qa_memory.main, ["--settings", "8x1,8x0"],
     "argument --settings: '8x1,8x0': expected comma-separated BATCHxACCUMULATION of "
     "integers >= 1, such as 8x1,32x4"),
    (bench_data_prep.main, ["--corpus", "none.txt"],
     "--corpus none.txt: no such file; expected a file"),
    (bench_data_prep.main, ["--sample-every", "0"],
     "--sample-every 0: expected an integer >= 1"),
    (bench_islands.main, ["--heads", "0"], "--heads 0: expected an integer >= 1"),
    (bench_multi_worker.main, ["--corpus-mb", "0"],
     "--corpus-mb 0.0: expected a number > 0"),
]


@pytest.mark.parametrize("main,argv,message", CASES, ids=[" ".join(c[1]) for c in CASES])
def test_a_bad_flag_is_one_line_at_parse_time(tmp_path, capsys, monkeypatch, main, argv,
                                              message):
  monkeypatch.chdir(tmp_path)
  with pytest.raises(SystemExit) as raised:
    main(argv)
  assert raised.value.code == 2
  assert capsys.readouterr().err.splitlines()[-1].endswith(f": error: {message}")
  assert not os.listdir(tmp_path)


def test_the_experiments_flags_share_the_rules(capsys):
  from experiments import encoder_anatomy  # pylint: disable=g-import-not-at-top
  for argv, message in ((["--seed", "-1"],
                         "--seed -1: expected an integer in [0, 4294967295]"),
                        (["--steps", "0"], "--steps 0: expected an integer >= 1"),
                        (["--output", ""], "--output '': expected a path")):
    with pytest.raises(SystemExit):
      encoder_anatomy.parse_args(["--data-dir", "d"] + argv)
    assert capsys.readouterr().err.splitlines()[-1].endswith(f": error: {message}")
  # Hyperparameters are the fine-tuning config's: a wrong one is its one line, no trace.
  for text, message in (('{"max_train_examples": 5}', "--hparams: unknown hyperparameter "
                         "'max_train_examples'; did you mean 'num_train_epochs'?"),
                        ("[1]", "--hparams: '[1]' is neither a JSON object nor an "
                         "existing JSON file")):
    assert encoder_anatomy.main(["--data-dir", "d", "--random", "r", "--hparams",
                                 text]) == 2
    assert capsys.readouterr().err == f"error: {message}\n"


def test_a_runs_seed_has_the_flags_range(tmp_path, capsys):
  """Refused with the hyperparameters, not by NumPy's seeding once the run starts."""
  import run_pretraining  # pylint: disable=import-outside-toplevel
  assert run_pretraining.main(["--model-name", "x", "--data-dir", str(tmp_path),
                               "--hparams", '{"seed": 4294967296}']) == 2
  assert capsys.readouterr().err == (
      "error: --hparams: seed 4294967296: expected an integer in [0, 4294967295]\n")


def test_a_failing_child_is_one_line():
  """Killed (as the kernel kills one out of memory), or crashed in a bench's own kind of
  child (bench_data_prep's): how it ended and its exception, its stderr in a file."""
  def one_line(failure):
    head, log = str(failure).split(" (its stderr: ")
    with open(log.rstrip(")"), encoding="utf-8") as f:
      stderr = f.read()
    os.remove(log.rstrip(")"))
    return head, stderr
  assert one_line(child.failed("bench.bench_qa_memory.run_setting", -9, "")) == (
      "bench.bench_qa_memory.run_setting was killed by SIGKILL: no output", "")
  with pytest.raises(child.ChildFailed) as crashed:
    bench_data_prep.child_result("1 / 0")
  head, stderr = one_line(crashed.value)
  assert head == f"a child in {ROOT} exited 1: ZeroDivisionError: division by zero"
  assert stderr.startswith("Traceback")


def test_a_bench_says_a_failed_child_in_one_line(monkeypatch, capsys):
  """As its one error, or as a row's error in the JSON where the others go on."""
  crash = "run_ours exited 1: MemoryError: out of memory (its stderr: /tmp/x.log)"

  def fail(*_, **__):
    raise child.ChildFailed(crash)
  monkeypatch.setattr(child, "measure", fail)
  capsys.readouterr()
  assert bench_bf16.main([]) == 2
  assert capsys.readouterr().err == f"error: {crash}\n"
  assert bench_memory.main(["--variants", "default"]) == 0
  row = capsys.readouterr().out.splitlines()[0]
  assert json.loads(row) == {"variant": "default", "error": crash}


def test_check_flags_converts_and_keeps_a_valid_value():
  import argparse  # pylint: disable=g-import-not-at-top
  parser = argparse.ArgumentParser()
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args(["--seed", "3"])
  cli.check_flags(parser, args, seed={"at_least": 0})
  assert args.seed == 3


def test_the_run_tools_read_a_runs_record_as_the_commands_do(tmp_path, capsys,
                                                            monkeypatch):
  from tools import compare_runs, eval_checkpoints  # pylint: disable=g-import-not-at-top
  model_dir = tmp_path / "models" / "m"
  model_dir.mkdir(parents=True)
  record = model_dir / "pretrain_config.json"
  record.write_text("[1]")
  expected = (f"error: {record}: not the run's record (holds a JSON array; expected the "
              "JSON object run_pretraining.py writes, with 'signature' and 'config' "
              "objects); put the run's own record back, or use another model_dir, or set "
              "\"overwrite_model_dir\": true to delete the run and start over\n")
  for main, argv in ((eval_checkpoints.main, ["--data-dir", str(tmp_path), "--model-name",
                                              "m"]),
                     (compare_runs.main, [f"m={model_dir}", "--output",
                                          str(tmp_path / "x.png")])):
    monkeypatch.setattr("sys.argv", ["tools"] + argv)
    assert main() == 2
    assert capsys.readouterr().err == expected
  assert sorted(os.listdir(tmp_path)) == ["models"] and record.read_text() == "[1]"


def test_the_run_tools_name_a_missing_model_dir(tmp_path, capsys, monkeypatch):
  from tools import compare_runs, eval_checkpoints  # pylint: disable=g-import-not-at-top
  (tmp_path / "models" / "empty").mkdir(parents=True)
  (tmp_path / "models" / "file").write_text("")
  for name, expected in (
      ("absent", f"{tmp_path}/models/absent: no such model dir; expected the model dir "
                 "of a run of run_pretraining.py, which holds its pretrain_config.json"),
      ("file", f"{tmp_path}/models/file: not a folder; expected the model dir of a run "
               "of run_pretraining.py, which holds its pretrain_config.json"),
      ("empty", f"{tmp_path}/models/empty holds no run (pretrain_config.json, which "
                "run_pretraining.py writes)")):
    for main, argv in ((eval_checkpoints.main, ["--data-dir", str(tmp_path),
                                                "--model-name", name]),
                       (compare_runs.main, [f"m={tmp_path}/models/{name}", "--output",
                                            str(tmp_path / "x.png")])):
      monkeypatch.setattr("sys.argv", ["tools"] + argv)
      assert main() == 2
      assert capsys.readouterr().err == f"error: {expected}\n"
  assert sorted(os.listdir(tmp_path / "models")) == ["empty", "file"]
