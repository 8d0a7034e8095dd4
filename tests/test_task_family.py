"""A task family is one folder and one line: a toy family declared in this module and
registered in one place runs end to end through run_finetuning.py; the registry refuses
what no family declares; the fine-tuning config, and both commands' --help, load without
TensorFlow."""

import dataclasses
import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import run_finetuning
from finetune import config as finetune_config
from finetune import tasks
from finetune.errors import DataError
from finetune.family import Family
from finetune.runner import TaskRunner
from finetune.sentence.data import encode
from finetune.sentence.model import SentenceHead
from finetune.sentence.data import SentenceExample
from tests.helpers import ROOT, shared_path
from tools import export
from util import hparams

WORDS = ("cat", "dog", "bird", "fish")


@dataclasses.dataclass(frozen=True)
class FirstWordTask:
  """Is the first of four words "cat"? (The fields a family's task type must have.)"""
  name: str = "toy/first_word"
  aliases: tuple = ("first_word",)
  train_split: str = "train"
  eval_splits: tuple = ("dev",)
  test_splits: tuple = ()
  metrics: tuple = ("accuracy",)


READ = []  # (task name, split) of each read, in order


def read_first_word(task, path, split):
  del path  # no file: the examples are drawn
  READ.append((task.name, split))
  rng = random.Random(split)
  texts = [" ".join(rng.choice(WORDS) for _ in range(4))
           for _ in range(64 if split == "train" else 16)]
  return [SentenceExample(i, text, None, text.startswith("cat"))
          for i, text in enumerate(texts)]


class FirstWordRunner(TaskRunner):

  def features(self, examples, split):
    out = encode(self.tokenizer, examples, self.config.max_seq_length)
    out["label"] = np.array([e.label for e in examples], np.int32)
    return out

  def make_head(self, model_config):
    return SentenceHead(2, model_config.hidden_dropout_prob, name="task_specific/toy")

  def loss(self, outputs, batch):
    return tf.nn.sparse_softmax_cross_entropy_with_logits(batch["label"], outputs)

  def score(self, examples, features, outputs, split):
    return {"accuracy": 100 * float(np.mean(outputs.argmax(-1) == features["label"]))}

  def read_unlabeled(self, path):
    with open(path, encoding="utf-8") as f:
      return [SentenceExample(i, line.strip(), None, False) for i, line in enumerate(f)]

  def prediction_records(self, examples, features, outputs):
    return [{"index": e.eid, "cat_first": bool(o.argmax())}
            for e, o in zip(examples, outputs)]


@dataclasses.dataclass(frozen=True)
class ToySettings:
  """A registered family's own section."""
  first_word_vowels: int = hparams.field(2, at_least=0)
  toy_log_name: str = hparams.field("toy", resumable=True)


TOY = Family(name="toy", task_type=FirstWordTask, tasks=(FirstWordTask(),),
             split_file=lambda task, data_dir, split: split, read_file=read_first_word,
             runner=lambda: FirstWordRunner,
             settings=ToySettings)


@pytest.fixture
def toy_registered(monkeypatch):
  monkeypatch.setattr(tasks, "FAMILIES", list(tasks.FAMILIES))  # undone after the test
  tasks.register(TOY)


@pytest.mark.slow
def test_a_toy_family_registered_in_one_place_runs_through_the_script(
    toy_registered, tmp_path, capsys):
  """The default command, serving export on: a family without one (runner.serving
  None) trains, scores, says in one line that it has no SavedModel, and predicts."""
  del toy_registered
  data = tmp_path / "data"
  data.mkdir()
  (data / "vocab.txt").write_bytes(
      open(shared_path("vocab", "bert_uncased_vocab.txt"), "rb").read())
  READ.clear()
  flags = ["--task", "first_word", "--data-dir", str(data), "--hparams", json.dumps(
      {"debug": True, "train_batch_size": 8, "max_seq_length": 8, "num_train_epochs": 1,
       "write_curves": False})]
  code = run_finetuning.main(flags)
  out = capsys.readouterr()
  assert code == 0, out.err[-2000:]
  assert out.out.count("no serving SavedModel") == 1
  assert ("toy/first_word: no serving SavedModel (its family declares no serving: "
          "finetune/serving.py Serving)\n") in out.out
  # The family's reader read both splits, the debug run's 100 examples at most.
  assert sorted(READ) == [("toy/first_word", "dev"), ("toy/first_word", "train")]
  results = data / "models" / "electra_small" / "results" / "toy_first_word_results.json"
  report = json.loads(results.read_text())
  assert list(report["summary"]) == ["toy/first_word dev accuracy"]
  accuracy = report["summary"]["toy/first_word dev accuracy"]["median"]
  assert 0 <= accuracy <= 100
  # 64 training examples in batches of 8, one epoch: the runner's loss trains 8 steps.
  assert "starting at step 0/8" in out.out
  trial = data / "models" / "electra_small" / "finetuning_models" / "toy_first_word_model_1"
  assert not (trial / "saved_model").exists()
  # --predict on the dev texts: the evaluation's accuracy again.
  dev = read_first_word(FirstWordTask(), None, "dev")
  texts = tmp_path / "texts.txt"
  texts.write_text("".join(e.text_a + "\n" for e in dev))
  assert run_finetuning.main(flags + ["--predict", str(texts)]) == 0
  records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
  assert [r["index"] for r in records] == list(range(len(dev)))
  assert 100 * np.mean([r["cat_first"] == e.label for r, e in zip(records, dev)]) == \
      pytest.approx(accuracy)
  # tools.export's SavedModel: one line.
  assert export.main(["--model-dir", str(trial), "--output", str(tmp_path / "out"),
                      "--format", "saved_model"]) == 2
  assert capsys.readouterr().err == (
      f"error: {trial}: saved_model takes a model of a family with a serving function (its "
      "serving.py's SERVING); toy/first_word is of the toy family\n")


def test_a_family_registered_twice_or_with_a_taken_name_is_refused(toy_registered):
  del toy_registered
  with pytest.raises(ValueError, match="a task family named 'toy' is registered already"):
    tasks.register(TOY)
  with pytest.raises(ValueError, match="task name 'glue/sst2' is taken"):
    tasks.register(dataclasses.replace(
        TOY, name="other", tasks=(FirstWordTask(name="glue/sst2", aliases=()),)))


def test_a_task_no_family_declares_is_an_error_not_tagging():
  stray = FirstWordTask()  # its family is not registered here
  with pytest.raises(DataError, match="no task family declares its type FirstWordTask"):
    tasks.read_examples(stray, "data", "train")
  with pytest.raises(DataError, match="no task family declares"):
    tasks.runner_for(stray, None, None)


def test_the_finetuning_config_loads_without_tensorflow_or_the_metrics_libraries():
  code = ("import sys\nfrom finetune import config\n"
          "c = config.load_config('electra_small', ['squad', 'glue/mrpc'], 'data',"
          " {'beam_size': 5})\n"
          "print(c.sections['qa'].beam_size, c.sections['sentence'].double_unordered,"
          " c.tasks_label)\n"
          "print(sorted(m for m in sys.modules if m.split('.')[0] in "
          "('tensorflow', 'tf_keras', 'keras', 'sklearn', 'scipy')))\n")
  run = subprocess.run([sys.executable, "-c", code], capture_output=True,
                       text=True, check=True)
  assert run.stdout.splitlines() == ["5 True squad_v2.0,glue_mrpc", "[]"]


@pytest.mark.parametrize("command", ["run_finetuning.py", "run_pretraining.py"])
def test_help_loads_no_tensorflow(command):
  code = ("import runpy, sys\nsys.argv = [sys.argv[1], '--help']\n"
          "try:\n  runpy.run_path(sys.argv[0], run_name='__main__')\n"
          "except SystemExit:\n  pass\n"
          "print('tensorflow' in sys.modules, file=sys.stderr)\n")
  run = subprocess.run([sys.executable, "-c", code, os.path.join(ROOT, command)],
                       capture_output=True, text=True, check=True)
  assert run.stdout.startswith("usage: ") and run.stderr == "False\n"


def test_a_registered_familys_settings_are_its_runs_section_only(toy_registered):
  del toy_registered
  toy = finetune_config.load_config("electra_small", ["first_word"], "data",
                                    {"first_word_vowels": 3, "beam_size": 4})
  assert toy.sections["toy"] == ToySettings(first_word_vowels=3)
  assert list(toy.sections) == ["toy"]  # beam_size checked, then left out
  # Only its fixed fields sign the run; the record holds its whole section.
  assert toy.signed_fields()["sections"] == {"toy": {"first_word_vowels": 3}}
  assert dataclasses.asdict(toy)["sections"] == {"toy": {"first_word_vowels": 3,
                                               "toy_log_name": "toy"}}
  glue = finetune_config.load_config("electra_small", ["glue/mrpc"], "data",
                                     {"first_word_vowels": 3})
  assert glue.signed_fields()["sections"] == {"sentence": {"double_unordered": True}}
  assert "max_query_length" not in str(dataclasses.asdict(glue))
  for overrides, message in (
      ({"first_word_vowels": -1}, "--hparams: first_word_vowels -1: expected an "
       "integer >= 0"),
      ({"first_word_vowel": 1}, "--hparams: unknown hyperparameter 'first_word_vowel'; "
       "did you mean 'first_word_vowels'?"),
      ({"max_answer_length": "20"}, '--hparams: max_answer_length "20": expected an '
       "integer >= 1")):
    with pytest.raises(hparams.HParamsError) as info:
      finetune_config.load_config("electra_small", ["first_word"], "data", overrides)
    assert str(info.value) == message


def test_a_settings_name_two_places_declare_is_refused(monkeypatch):
  monkeypatch.setattr(tasks, "FAMILIES", list(tasks.FAMILIES))

  @dataclasses.dataclass(frozen=True)
  class Clashing:
    beam_size: int = 3
  tasks.register(dataclasses.replace(TOY, settings=Clashing))
  with pytest.raises(ValueError, match="task family toy: setting 'beam_size' is declared "
                     "by family qa already"):
    finetune_config.load_config("electra_small", ["first_word"], "data", {})


def test_a_config_reads_back_from_its_record_with_its_sections():
  """What an export reads of a trial: the config its record holds, sections included."""
  config = finetune_config.load_config(
      "electra_small", ["squad/v1.1"], "data", {"max_query_length": 40, "doc_stride": 96})
  record = json.loads(json.dumps(dataclasses.asdict(config)))  # as the run writes it
  again = finetune_config.FinetuningConfig.from_record(record)
  assert again.sections["qa"].max_query_length == 40
  assert again.sections["qa"].doc_stride == 96
  assert again == config
