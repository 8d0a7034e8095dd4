"""`python -m tools.*` and `experiments.*` flags are checked as the main commands' are: at
parse time, by the hyperparameters' rules (util/hparams.py), one line naming the flag,
the value and what is expected, before anything is read or written."""

import os

import pytest

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
]


@pytest.mark.parametrize("main,argv,message", CASES, ids=[" ".join(c[1]) for c in CASES])
def test_a_tools_bad_flag_is_one_line_at_parse_time(tmp_path, capsys, monkeypatch, main,
                                                    argv, message):
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
