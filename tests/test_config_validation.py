"""Hyperparameters are checked by type and range when a config is built.

Every field of the pre-training, fine-tuning and model configs refuses a value of the
wrong type (and, where it declares a range, one outside it) with one line naming the
field, the value and what is allowed; the cases a user met reach the user through the
scripts as that one line, with no traceback.
"""

import dataclasses
import json
import os
import re
import shutil
import typing

import pytest

import run_finetuning
import run_pretraining
from finetune import config as finetune_config
from finetune import tasks as task_registry
from finetune import trainer as finetune_trainer
from model.config import ModelConfig
from pretrain import config as pretrain_config
from tests.helpers import write_reviews_task, write_tiny_pretrained_model
from util import hparams

CONFIGS = [pretrain_config.PretrainingConfig, finetune_config.FinetuningConfig,
           ModelConfig]


WRONG_TYPES = {bool: ["false", 0, None], int: ["1", 1.5, True, None],
               float: ["x", False, float("nan"), None], str: [1, None],
               dict: [[], "{}"], list: ["glue/sst2", [1]]}


def wrong_types(kind):
  """Values of another type than `kind` accepts (JSON's view: 2.0 is an integer)."""
  optional = typing.get_origin(kind) is typing.Union
  if optional:
    kind = next(a for a in typing.get_args(kind) if a is not type(None))
  return [v for v in WRONG_TYPES[typing.get_origin(kind) or kind]
          if not (optional and v is None)]


def out_of_range(allowed):
  if allowed.choices is not None:
    return ["nope"]
  values = []
  if allowed.at_least is not None:
    values.append(allowed.at_least - 1)
  if allowed.above is not None:
    values.append(allowed.above)
  if allowed.at_most is not None:
    values.append(allowed.at_most + 0.5)
  if allowed.below is not None:
    values.append(allowed.below)
  return values


def bad_values(cls):
  """(field name, a value the field refuses) of every field of dataclass `cls`."""
  hints = typing.get_type_hints(cls)
  for field in dataclasses.fields(cls):
    allowed = field.metadata.get("allowed")
    for value in wrong_types(hints[field.name]) + (out_of_range(allowed) if allowed
                                                   else []):
      yield field.name, value


def assert_refused(name, build):
  """build() refuses field `name`'s value with one line naming the field."""
  with pytest.raises(hparams.HParamsError) as info:
    build()
  message = str(info.value)
  assert message.startswith(f"{name} ") and ": expected " in message, message
  assert "\n" not in message


@pytest.mark.parametrize("cls", CONFIGS, ids=lambda c: c.__name__)
def test_every_field_refuses_wrong_types_and_values_out_of_range(cls):
  default = cls()
  checked = 0
  for name, value in bad_values(cls):
    assert_refused(name, lambda: dataclasses.replace(default, **{name: value}))
    checked += 1
  assert checked >= 2 * len(dataclasses.fields(cls))


SECTIONED = [family for family in task_registry.FAMILIES if family.settings]


@pytest.mark.parametrize("family", SECTIONED, ids=lambda f: f.name)
def test_every_section_field_refuses_wrong_types_and_values_out_of_range(family):
  # A task family's settings are checked as the run of its task is built, and as a
  # flat --hparams name (the error then names --hparams too).
  task = [family.tasks[0].name]
  checked = 0
  for name, value in bad_values(family.settings):
    section = dataclasses.replace(family.settings(), **{name: value})
    assert_refused(name, lambda: finetune_config.FinetuningConfig(
        task_names=task, sections={family.name: section}))
    with pytest.raises(hparams.HParamsError) as info:
      finetune_config.load_config("x", task, overrides={name: value})
    assert str(info.value).startswith(f"--hparams: {name} "), info.value
    checked += 1
  assert checked >= 2 * len(dataclasses.fields(family.settings))


def test_numbers_are_taken_as_json_gives_them():
  config = pretrain_config.load_config("x", "data", {"num_train_steps": 1e6,
                                                     "learning_rate": 1, "mask_prob": 1})
  assert config.num_train_steps == 1000000 and isinstance(config.num_train_steps, int)
  assert config.learning_rate == 1.0 and isinstance(config.learning_rate, float)
  assert pretrain_config.load_config("x", "data", {"embedding_size": None}
                                     ).embedding_size is None


PRETRAINING_CASES = [
    ({"debug": "false"}, '--hparams: debug "false": expected true or false'),
    ({"mask_prob": 1.5}, "--hparams: mask_prob 1.5: expected a number in (0, 1]"),
    ({"learning_rate": -0.01}, "--hparams: learning_rate -0.01: expected a number > 0"),
    ({"num_train_steps": "ten"},
     '--hparams: num_train_steps "ten": expected an integer >= 1'),
    ({"num_train_steps": 2.5}, "--hparams: num_train_steps 2.5: expected an integer >= 1"),
    ({"train_batch_size": 0}, "--hparams: train_batch_size 0: expected an integer >= 1"),
    ({"save_checkpoints_steps": 0},
     "--hparams: save_checkpoints_steps 0: expected an integer >= 1"),
    ({"distribution_strategy": "gpu"}, '--hparams: distribution_strategy "gpu": expected '
     'one of "default", "one_device", "mirrored", "multi_worker", "tpu"'),
    ({"model_hparam_overrides": {"hidden_dropout_prob": 1}},
     "model_hparam_overrides: hidden_dropout_prob 1: expected a number in [0, 1)"),
    ({"max_seq_length": 1024}, "max_seq_length 1024 exceeds max_position_embeddings 512 "
     "of model size 'small'; lower max_seq_length"),
    ({"debug": True, "max_seq_length": 600}, "max_seq_length 600 exceeds "
     "max_position_embeddings 512 of model size 'debug'; lower max_seq_length"),
    # The other phase's setting: said so, no near name of this phase suggested.
    ({"layerwise_lr_decay": 0.8}, "--hparams: 'layerwise_lr_decay' is a hyperparameter "
     "of fine-tuning (run_finetuning.py), not of this command"),
    # Rules between fields, checked as the config is built.
    ({"gradient_accumulation_steps": 3}, "train_batch_size 128 does not split evenly "
     "over 1 replica(s) x gradient_accumulation_steps 3"),
    ({"electric_objective": True, "untied_generator": False}, "a two-tower generator "
     "(two_tower_generator, or objective electric) needs untied_generator true, "
     "uniform_generator false and objective electra or electric (got untied_generator "
     "false, uniform_generator false, objective electric)"),
    ({"objective": "masked_lm", "two_tower_generator": True}, "a two-tower generator "
     "(two_tower_generator, or objective electric) needs untied_generator true, "
     "uniform_generator false and objective electra or electric (got untied_generator "
     "true, uniform_generator false, objective masked_lm)"),
    ({"objective": "masked_lm", "electric_objective": True}, "objective masked_lm and "
     "the original's electric_objective true (objective electric) disagree; give one "
     "of them"),
    # An explicit "electra" (the default's value) beside a switch that chooses another.
    ({"objective": "electra", "electric_objective": True}, "objective electra and the "
     "original's electric_objective true (objective electric) disagree; give one of "
     "them"),
    ({"objective": "electra", "electra_objective": False}, "objective electra and the "
     "original's electra_objective false (objective masked_lm) disagree; give one of "
     "them"),
    ({"electra_objective": 1}, "--hparams: electra_objective 1: expected true or false "
     "or null"),
]


@pytest.mark.parametrize("overrides,message", PRETRAINING_CASES,
                         ids=[str(c[0]) for c in PRETRAINING_CASES])
def test_run_pretraining_prints_one_line(tmp_path, capsys, overrides, message):
  code = run_pretraining.main(["--model-name", "x", "--data-dir", str(tmp_path),
                               "--hparams", json.dumps(overrides)])
  assert (code, capsys.readouterr().err) == (2, f"error: {message}\n")
  assert not list(tmp_path.iterdir())  # refused before anything was written


def test_a_model_name_is_one_plain_folder_name(tmp_path, capsys):
  """--model-name names the run's folder under <data-dir>/models: ".." made the data dir
  the model dir and "" the models folder, which overwrite_model_dir deleted whole."""
  data = tmp_path / "data"
  (data / "models" / "other_run").mkdir(parents=True)
  (data / "vocab.txt").write_text("[PAD]\n")
  held = sorted(data.rglob("*"))
  expected = ("expected one plain folder name, the run's folder under <data-dir>/models "
              "(no path separators, not '', '.' or '..')")
  for main, flags in ((run_pretraining.main, []),
                      (run_finetuning.main, ["--task", "glue/sst2"])):
    for name in ("..", "", ".", "other_run/..", "/tmp"):
      code = main(flags + ["--model-name", name, "--data-dir", str(data), "--hparams",
                           '{"overwrite_model_dir": true}'])
      assert (code, capsys.readouterr().err) == (
          2, f"error: --model-name {name!r}: {expected}\n")
    # --hparams' model_name, which wins over the flag, likewise.
    code = main(flags + ["--model-name", "x", "--data-dir", str(data), "--hparams",
                         '{"model_name": ".."}'])
    assert (code, capsys.readouterr().err) == (
        2, f"error: --hparams' model_name '..': {expected}\n")
  assert sorted(data.rglob("*")) == held


def test_a_repeated_hparams_key_is_named(tmp_path, capsys):
  """JSON keeps a repeated key's last value without a word: refused, by name, in the
  flag's JSON and in a file, nested objects included."""
  hparams_file = tmp_path / "hp.json"
  hparams_file.write_text('{"model_hparam_overrides": {"hidden_size": 64,\n'
                          '                            "hidden_size": 128}}')
  for given, source, key in (
      ('{"learning_rate": 1e-3, "num_train_steps": 5, "learning_rate": 2e-3}',
       "--hparams", "learning_rate"),
      (str(hparams_file), str(hparams_file), "hidden_size")):
    code = run_pretraining.main(["--model-name", "x", "--data-dir", str(tmp_path / "d"),
                                 "--hparams", given])
    assert (code, capsys.readouterr().err) == (
        2, f"error: {source}: key '{key}' appears twice in one JSON object; give each "
        "name once\n")
  assert not (tmp_path / "d").exists()


@pytest.fixture(scope="module")
def reviews(tmp_path_factory):
  """(data dir with BERT's vocab and a tiny pre-trained model, a 100-example task)."""
  root = tmp_path_factory.mktemp("reviews")
  data = root / "data"
  data.mkdir()
  write_tiny_pretrained_model(data)
  return data, write_reviews_task(root, 100)


FINETUNING_CASES = [
    ({"num_train_epochs": "one"},
     '--hparams: num_train_epochs "one": expected a number > 0'),
    ({"warmup_proportion": 2}, "--hparams: warmup_proportion 2: expected a number in "
     "[0, 1]"),
    ({"mask_prob": 0.2}, "--hparams: 'mask_prob' is a hyperparameter of pre-training "
     "(run_pretraining.py), not of this command"),
    # A step far beyond the machine's memory: refused before the first model call.
    ({"debug": True, "max_seq_length": 16384, "train_batch_size": 32,
      "model_hparam_overrides": {"max_position_embeddings": 16384}},
     re.compile(r"a training step needs about [\d,.]+ GiB \(activations [\d,.]+ GiB, of "
                r"which attention [\d,.]+ GiB; .* but this machine has [\d,.]+ GiB "
                r"available; lower train_batch_size or max_seq_length, or set "
                r"\"gradient_accumulation_steps\" \(the same update in smaller pieces\) or "
                r"\"recompute\": true")),
    ({"task_names": "glue/sst2"},
     '--hparams: task_names "glue/sst2": expected a list of strings'),
    ({"train_batch_size": 16, "gradient_accumulation_steps": 3}, "train_batch_size 16 "
     "does not split evenly over 1 replica(s) x gradient_accumulation_steps 3"),
    ({"debug": True, "max_seq_length": 1024}, "max_seq_length 1024 exceeds "
     "max_position_embeddings 512 of model size 'debug'; lower max_seq_length"),
    # The model is the pre-trained checkpoint's: its position embeddings decide.
    ({"max_seq_length": 256}, "max_seq_length 256 exceeds max_position_embeddings 128 of "
     "{data}/models/tiny/export/model.ckpt; lower max_seq_length"),
    ({"debug": True, "train_batch_size": 8, "num_train_epochs": 0.05},
     "100 training features // train_batch_size 8 = 12 full batches x num_train_epochs "
     "0.05 = 0.6 training steps, fewer than one; raise num_train_epochs or lower "
     "train_batch_size"),
]


@pytest.mark.parametrize("overrides,message", FINETUNING_CASES,
                         ids=[str(c[0]) for c in FINETUNING_CASES])
def test_run_finetuning_prints_one_line(reviews, capsys, overrides, message):
  data, task = reviews
  code = run_finetuning.main(["--task", task, "--model-name", "tiny", "--data-dir",
                              str(data), "--hparams",
                              json.dumps({"max_seq_length": 16, **overrides})])
  err = capsys.readouterr().err
  if isinstance(message, re.Pattern):
    assert code == 2 and re.fullmatch("error: " + message.pattern + "\n", err), err
  else:
    assert (code, err) == (2, "error: " + message.format(data=data) + "\n")
  shutil.rmtree(data / "models" / "tiny" / "finetuning_models", ignore_errors=True)


def test_a_refused_finetuning_leaves_no_folder_behind(reviews, capsys):
  data, task = reviews
  # No model and no vocabulary: refused once the run holds its model dir's lock.
  code = run_finetuning.main(["--task", task, "--model-name", "absent", "--data-dir",
                              str(data), "--hparams",
                              json.dumps({"vocab_file": str(data / "none.txt")})])
  assert code == 2 and capsys.readouterr().err.startswith(
      f"error: no pre-trained model: {data / 'models' / 'absent'} holds no checkpoint")
  assert not (data / "models" / "absent").exists()  # no empty folder, no lock file


def test_model_config_file_is_named(tmp_path):
  with pytest.raises(hparams.HParamsError) as info:
    ModelConfig.from_dict({"hidden_size": "256"}, source="electra_small/config.json")
  assert str(info.value) == ('electra_small/config.json: hidden_size "256": expected an '
                             'integer >= 1')


def test_debug_run_validates_init_checkpoint(reviews, tmp_path, capsys):
  data, task = reviews
  missing = str(tmp_path / "nowhere" / "model.ckpt")
  code = run_finetuning.main(["--task", task, "--data-dir", str(data), "--init-checkpoint",
                              missing, "--hparams", '{"debug": true}'])
  err = capsys.readouterr().err
  assert code == 2 and err.startswith(f"error: {missing}: no such checkpoint") and \
      err.count("\n") == 1
  # One cut short (its .data file half written): one line, not TensorFlow's IndexError.
  cut = tmp_path / "cut"
  shutil.copytree(data / "models" / "tiny" / "export", cut)
  data_file = next(cut.glob("*.data-*"))
  data_file.write_bytes(data_file.read_bytes()[:data_file.stat().st_size // 2])
  code = run_finetuning.main(["--task", task, "--data-dir", str(data), "--init-checkpoint",
                              str(cut), "--hparams",
                              '{"debug": true, "max_seq_length": 16}'])
  assert (code, capsys.readouterr().err) == (2, (
      f"error: {data_file}: Read less bytes than requested; the checkpoint is cut short "
      "or damaged: copy or fetch it again\n"))
  shutil.rmtree(data / "models" / "tiny" / "finetuning_models", ignore_errors=True)
  # A valid one is used: the debug run's model is the checkpoint's, not the debug size.
  export = str(data / "models" / "tiny" / "export")
  config = finetune_config.load_config("electra_small", [task], str(data),
                                       {"debug": True, "init_checkpoint": export})
  finetuner = finetune_trainer.Finetuner(config)
  assert finetuner.start.weights.location.endswith("/tiny/export/model.ckpt")
  assert finetuner.model_config.hidden_size == 32  # debug size: 144


def test_the_vocabulary_size_is_checked_as_the_pretraining_config_is_built(tmp_path,
                                                                          capsys):
  specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
  (tmp_path / "vocab.txt").write_text("".join(
      f"{token}\n" for token in specials + [f"token{i}" for i in range(95)]))
  # Left at its default, vocab_size is the file's; set, it must be.
  assert pretrain_config.load_config("x", str(tmp_path)).vocab_size == 100
  code = run_pretraining.main(["--model-name", "x", "--data-dir", str(tmp_path),
                               "--hparams", '{"vocab_size": 1000}'])
  assert (code, capsys.readouterr().err) == (
      2, f"error: {tmp_path}/vocab.txt holds 100 tokens but the config (vocab_size) has a "
      'vocabulary of 1000; set "vocab_size": 100\n')
  assert [p.name for p in tmp_path.iterdir()] == ["vocab.txt"]  # nothing written


def test_objective_is_one_choice_with_the_original_switches_as_aliases():
  def objective(**overrides):
    config = pretrain_config.load_config("x", "data", overrides)
    return config.objective, config.two_tower_generator
  assert objective() == ("electra", False)
  assert objective(electra_objective=False) == objective(objective="masked_lm") == (
      "masked_lm", False)
  # Electric's generator is the two-tower cloze model, as the original's config sets it.
  assert objective(electric_objective=True) == objective(objective="electric") == (
      "electric", True)
  assert objective(electric_objective=True, electra_objective=False) == ("electric", True)
  # Given both ways, the same objective is no conflict.
  assert objective(objective="electric", electric_objective=True) == ("electric", True)
  assert objective(objective="electra", electra_objective=True) == ("electra", False)
  assert "electra_objective" not in pretrain_config.load_config("x", "data").to_dict()


NOT_RECORDS = [("[1]", "a JSON array"), ('{"foo": 1}', "a JSON object with keys 'foo'"),
               ('"x"', "a JSON string")]


def not_the_record(path, held, writer, keys):
  return (f"{path}: not the run's record (holds {held}; expected the JSON object "
          f"{writer} writes, with {keys} objects); put the run's own record back, or use "
          "another model_dir, or set \"overwrite_model_dir\": true to delete the run and "
          "start over")


@pytest.mark.parametrize("text,held", NOT_RECORDS, ids=[c[0] for c in NOT_RECORDS])
def test_a_pretraining_record_that_is_not_the_runs_is_refused(tmp_path, capsys, text,
                                                              held):
  """Valid JSON in the record's place is not taken as read (and rewritten): one line,
  the file as it was."""
  from pretrain import run_record  # pylint: disable=g-import-not-at-top
  model_dir = tmp_path / "models" / "x"
  model_dir.mkdir(parents=True)
  record = model_dir / "pretrain_config.json"
  record.write_text(text)
  config = pretrain_config.load_config("x", str(tmp_path), {"learning_rate": 0.01})
  with pytest.raises(ValueError) as raised:
    run_record.check_model_dir(config)
  assert str(raised.value) == not_the_record(record, held, "run_pretraining.py",
                                             "'signature' and 'config'")
  # Only evaluating it: the same.
  with pytest.raises(ValueError) as raised:
    run_record.check_model_dir(dataclasses.replace(config, do_train=False, do_eval=True))
  assert str(raised.value).startswith(f"{record}: not the run's record")
  assert record.read_text() == text and sorted(p.name for p in model_dir.iterdir()) == [
      "pretrain_config.json"]


def test_a_finetuning_record_that_is_not_the_runs_is_refused(reviews, capsys):
  data, task = reviews
  trial = data / "models" / "tiny" / "finetuning_models" / "reviews_model_1"
  trial.mkdir(parents=True)
  record = trial / "finetuning_config.json"
  try:
    for text, held in NOT_RECORDS:
      record.write_text(text)
      code = run_finetuning.main(["--task", task, "--model-name", "tiny", "--data-dir",
                                  str(data), "--hparams",
                                  '{"max_seq_length": 16, "learning_rate": 0.01}'])
      assert (code, capsys.readouterr().err) == (2, "error: " + not_the_record(
          record, held, "run_finetuning.py", "'finetuning' and 'model'") + "\n")
      assert record.read_text() == text and os.listdir(trial) == [
          "finetuning_config.json"]
  finally:
    shutil.rmtree(data / "models" / "tiny" / "finetuning_models", ignore_errors=True)
