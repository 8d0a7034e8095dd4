"""bench.bench_inference: each bad flag one line at parse time, a model it cannot take
refused in its child's own line with nothing left behind, a child's failure one line,
its work folder keyed on the model (another model's or an incomplete export is
rebuilt), --dev-examples cuts the split and its gold set alike, a tagging and a QA
model measured end to end in their float forms and the PyTorch peer: each float form's
dev metric is the SavedModel's, which is the run's own evaluation, and its answers the
SavedModel's; a QA head transformers has no class of is one line; a single-sentence
model through every form, and by --lengths (the SavedModel and two files)."""

import json
import os
import shutil
import subprocess
import sys
import types

import pytest

from bench import bench_inference, child
from export import huggingface
from tests.helpers import ROOT
from tests.export_helpers import (SST2_SMOOTHING_ALPHA, TRANSFORMERS_QA_HEAD,
                                   shared_chunk_export, shared_chunk_model,
                                   shared_glue_models, shared_squad_model,
                                   shared_sst2_export)


def bench(*flags: str) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, "-m", "bench.bench_inference", *flags],
                        cwd=ROOT, capture_output=True, text=True, timeout=900,
                        check=False)


@pytest.mark.parametrize("flags,message", [
    (["--threads", "abc"], "argument --threads: 'abc': expected thread counts of at "
     "least 1, comma-separated, such as 1,2"),
    (["--threads", "1,0"], "argument --threads: '1,0': expected thread counts of at "
     "least 1, comma-separated, such as 1,2"),
    (["--sentences", "0"], "--examples 0: expected an integer >= 1"),
    (["--dev-examples", "0"], "--dev-examples 0: expected an integer >= 1"),
    (["--smoothing-alpha", "x"], "--smoothing-alpha 'x': expected a number from 0 to 1, "
     "or none"),
    (["--lengths", "10,1"], "argument --lengths: '10,1': expected lengths in tokens of "
     "at least 2, comma-separated, such as 10,25,128"),
    (["--forms", "LiteRT"], "argument --forms: 'LiteRT': expected form names, "
     "comma-separated, of: " + ", ".join(bench_inference.FORMS)),
    (["--work-dir", "{file}"], "--work-dir {file}: is a file; expected a folder for the "
     "exports"),
    (["--model-dir", "{missing}"], "--model-dir {missing}: no such directory; expected a "
     "fine-tuned trial dir of run_finetuning.py (<model_dir>_<trial>)")])
def test_bad_flags_are_one_line_at_parse_time(tmp_path, capsys, flags, message):
  paths = {"file": tmp_path / "a_file", "missing": tmp_path / "missing"}
  paths["file"].write_text("x")
  flags = [f.format(**paths) for f in flags]
  with pytest.raises(SystemExit) as raised:
    bench_inference.parse_args(["--model-dir", str(tmp_path), *flags])
  assert raised.value.code == 2
  assert capsys.readouterr().err.splitlines()[-1] == (
      f"{os.path.basename(sys.argv[0])}: error: " + message.format(**paths))
  assert sorted(os.listdir(tmp_path)) == ["a_file"]


@pytest.mark.slow
def test_a_model_the_bench_cannot_take_is_its_childs_one_line(tmp_path):
  pretraining = tmp_path / "pretraining"
  pretraining.mkdir()
  (pretraining / "pretrain_config.json").write_text("{}")
  qa = tmp_path / "models" / "m" / "finetuning_models" / "squad_model_1"
  qa.mkdir(parents=True)
  (qa / "finetuning_config.json").write_text(json.dumps(
      {"finetuning": {"task_names": ["squad"]}, "model": {}}))
  work = tmp_path / "work"
  message = (f"{pretraining} is a pre-training model dir, not a fine-tuned model; "
             f"fine-tune it first (python run_finetuning.py --task TASK --init-checkpoint "
             f"{pretraining}) and give the fine-tuned trial's dir (<model_dir>_1)")
  run = bench("--model-dir", str(pretraining), "--work-dir", str(work))
  assert (run.returncode, run.stderr.splitlines()[-1:]) == (2, [f"error: {message}"])
  assert "Traceback" not in run.stderr and run.stdout == ""
  assert not work.exists()  # nothing left behind
  # Another refusal of the child's, whose line reaches the user the same way: its
  # message.
  with pytest.raises(ValueError) as refused:
    bench_inference.prepare(str(qa), str(work / "qa"), {})
  assert str(refused.value) == f"{qa}: holds finetuning_config.json but no checkpoint"
  assert not work.exists()


def test_a_childs_failure_is_one_line_naming_its_stderr():
  """A bug in a child (here a TypeError) reaches the parent as one line: the
  exception's, and the file that holds the child's traceback."""
  with pytest.raises(child.ChildFailed) as failed:
    child.measure(bench_inference.table, {"rows": None})
  message = str(failed.value)
  head, log = message.split(" (its stderr: ")
  assert head == ("bench.bench_inference.table exited 1: TypeError: 'NoneType' object "
                  "is not iterable") and "\n" not in log
  with open(log.rstrip(")"), encoding="utf-8") as f:
    assert f.read().startswith("Traceback")
  os.remove(log.rstrip(")"))


def trial_dir(root, name="m"):
  trial = root / "models" / name / "finetuning_models" / "sst2_model_1"
  trial.mkdir(parents=True)
  (trial / "finetuning_config.json").write_text("{}")
  (trial / "ckpt-2.index").write_text("index")
  return trial


def fill(folder, identity):
  """A work folder as prepare leaves it."""
  for name, files in (("export", bench_inference.EXPORT_FILES),
                      ("hf", bench_inference.HF_FILES)):
    os.makedirs(folder / name, exist_ok=True)
    for f in files:
      (folder / name / f).write_text("x")
  (folder / "export" / "deploy.json").write_text('{"input_lengths": {}}')
  (folder / bench_inference.DEV_INPUTS).write_text("[]")
  (folder / bench_inference.STAMP).write_text(json.dumps(identity))


def test_the_work_folder_is_the_models_own(tmp_path, capsys):
  one, other = trial_dir(tmp_path / "a"), trial_dir(tmp_path / "b")
  work = tmp_path / "work"
  # The same run and trial names, two models: two folders.
  folder = bench_inference.work_folder(str(one), str(work))
  assert folder != bench_inference.work_folder(str(other), str(work))
  assert os.path.basename(folder).startswith("m_sst2_model_1_")
  folder = tmp_path / "work" / os.path.basename(folder)
  identity = bench_inference.model_identity(str(one))
  # Whole and the model's: kept, without a word.
  fill(folder, identity)
  bench_inference.reuse_or_clear(str(folder), identity)
  assert capsys.readouterr().out == "" and sorted(os.listdir(folder)) == [
      "dev_texts.json", "export", "hf", "model.json"]
  # One exported form missing: that export is rebuilt (prepare writes what is absent).
  os.remove(folder / "export" / "model_full_int8.tflite")
  bench_inference.reuse_or_clear(str(folder), identity)
  assert capsys.readouterr().out == (f"note: {folder}/export is missing some of its files; "
                                     "rebuilding it\n")
  assert sorted(os.listdir(folder)) == ["dev_texts.json", "hf", "model.json"]
  # An export from before the files' sequence axis was free (its deploy.json does not
  # say which length each file takes): rebuilt, or --lengths would time max_seq_length.
  fill(folder, identity)
  (folder / "export" / "deploy.json").write_text('{"models": []}')
  bench_inference.reuse_or_clear(str(folder), identity)
  assert capsys.readouterr().out == (
      f"note: {folder}/export was written before its files' sequence axis was free (they "
      "take max_seq_length only); rebuilding it\n")
  assert sorted(os.listdir(folder)) == ["dev_texts.json", "hf", "model.json"]
  # The model retrained in place (its checkpoint changed): everything is rebuilt.
  fill(folder, identity)
  (one / "ckpt-2.index").write_text("another index")
  retrained = bench_inference.model_identity(str(one))
  assert retrained != identity
  bench_inference.reuse_or_clear(str(folder), retrained)
  assert capsys.readouterr().out == (
      f"note: {folder} holds the exports of another model or of an earlier training of "
      f"{one}; rebuilding them\n")
  assert os.listdir(folder) == []


def measured(trial, work, forms, *flags, converted=True):
  """bench_inference's JSON lines of `trial` (one thread, 3 examples timed; `flags`), by
  form, with the agreement its table gives (known once every form has run), and its
  output; when it `converted` the model, its exports hold the files of `forms` alone."""
  run = bench("--model-dir", str(trial), "--work-dir", str(work), "--examples", "3",
              "--threads", "1", "--forms", ",".join(forms), *flags)
  assert run.returncode == 0, run.stderr[-3000:]
  export = os.path.join(bench_inference.work_folder(str(trial), str(work)), "export")
  if converted:  # only the files of the forms measured
    assert sorted(n for n in os.listdir(export) if n.startswith("model_")) == sorted(
        bench_inference.FILES[f] for f in forms if f in bench_inference.FILES)
  lines = run.stdout.splitlines()
  rows = {row["form"]: row for row in map(json.loads, (l for l in lines if l[:1] == "{"))}
  for line in lines:
    cells = line.strip("| ").split(" | ")
    if cells[0] in rows:
      rows[cells[0]]["agree"] = float(cells[2])
  return rows, run.stdout


def put_exports(trial, work, exported, smoothing_alpha=None):
  """tools.export's folder `exported` of `trial` (made with `smoothing_alpha`) where
  the bench keeps its exports, as its own: {file: its mtime}, for reused."""
  export = os.path.join(bench_inference.work_folder(trial, str(work)), "export")
  shutil.copytree(exported, export)
  with open(os.path.join(os.path.dirname(export), bench_inference.STAMP), "w",
            encoding="utf-8") as f:
    json.dump(bench_inference.export_identity(trial, smoothing_alpha), f)
  return mtimes(export)


def mtimes(folder):
  return {n: os.stat(os.path.join(folder, n)).st_mtime_ns for n in os.listdir(folder)}


def reused(trial, work, files, *outputs):
  """The bench's outputs said no export was rebuilt, and none was: `files` (put_exports')
  as they were."""
  assert not [out for out in outputs if "rebuilding" in out]
  assert mtimes(os.path.join(bench_inference.work_folder(trial, str(work)),
                             "export")) == files


def run_scores(config):
  """The run's own evaluation of its dev split: metric -> value (one trial)."""
  with open(config.results_file("json"), encoding="utf-8") as f:
    summary = json.load(f)["summary"]
  return {name.rsplit(" ", 1)[-1]: value["median"] for name, value in summary.items()}


FLOAT_FORMS = ("LiteRT float32", "ONNX float32", "PyTorch float32")


def check_float_forms(rows, table, run_scores):
  """Every float form: the SavedModel's dev metric and answers; the SavedModel's metric
  is the run's own evaluation of the split (run_scores: metric -> value)."""
  assert set(rows) == {"SavedModel", *FLOAT_FORMS}
  # Without --isa, each form's child reads the CPU as it is.
  assert {row["isa"] for row in rows.values()} == {"native"}
  saved = rows["SavedModel"]["dev"]
  for name, value in run_scores.items():
    assert saved[name] == pytest.approx(value, abs=1e-6), name
  for form in FLOAT_FORMS:
    assert rows[form]["dev"] == saved, form
    assert rows[form]["agree"] == 100.0, form
    assert rows[form]["p50_ms"] > 0 and rows[form]["batch32_per_s"] > 0, form
  assert all(f"| {form} | " in table for form in rows)


@pytest.mark.slow
def test_a_tagging_model_in_its_float_forms(tmp_path, tmp_path_factory):
  config = shared_chunk_model(tmp_path_factory)
  # tools.export's files of the model: the bench's own (the QA test's are converted).
  trial, work = f"{config.model_dir}_1", tmp_path / "work"
  files = put_exports(trial, work, shared_chunk_export(tmp_path_factory))
  rows, out = measured(trial, work, FLOAT_FORMS, converted=False)
  reused(trial, work, files, out)
  # (chunk's dev split is CoNLL-2000's test set, as the run scores it; its long
  # sentences in windows.)
  scores = run_scores(config)
  assert set(rows["SavedModel"]["dev"]) == set(scores) == {"f1", "precision", "recall"}
  check_float_forms(rows, out, scores)


@pytest.mark.slow
def test_a_squad_2_model_in_its_float_forms(tmp_path, tmp_path_factory):
  # 8 dev questions, 2 of them without an answer; transformers' QA head.
  config, _ = shared_squad_model(tmp_path_factory, "squad/v2.0", "squad",
                                 TRANSFORMERS_QA_HEAD)
  scores = run_scores(config)
  rows, out = measured(f"{config.model_dir}_1", tmp_path / "work", FLOAT_FORMS)
  assert set(scores) == set(rows["SavedModel"]["dev"]) == {
      "exact_match", "f1", "best_exact_match", "best_f1"}
  check_float_forms(rows, out, scores)


@pytest.mark.slow
def test_a_sentence_model_through_every_form_and_by_length(tmp_path, tmp_path_factory):
  """A single-sentence model (SST-2, whose missing second text once reached the reader
  as None and failed) through every form: each scored, the float forms as the
  SavedModel (each form's batch-1 calls already take texts of several lengths); then
  --lengths: the SavedModel and two model files (two runtimes) timed on a text of each
  length (the other forms load by the same code, run 1's). Both runs reuse the work
  folder's exports, those of this model with these flags: here tools.export's
  (export_helpers.shared_sst2_export), put where the bench keeps them."""
  _, trial = shared_glue_models(tmp_path_factory)["glue/sst2"]
  work = tmp_path / "work"
  files = put_exports(trial, work, shared_sst2_export(tmp_path_factory)[0],
                      SST2_SMOOTHING_ALPHA)
  alpha = ["--smoothing-alpha", str(SST2_SMOOTHING_ALPHA)]
  rows, out = measured(trial, work, bench_inference.FORMS, *alpha)
  assert set(rows) == set(bench_inference.FORMS)
  for form, row in rows.items():
    assert set(row["dev"]) == {"accuracy"} and 0 <= row["agree"] <= 100, form
    if "int8" not in form:
      assert (row["dev"], row["agree"]) == (rows["SavedModel"]["dev"], 100.0), form
  run = bench("--model-dir", trial, "--work-dir", str(work), "--examples", "2",
              "--threads", "1", "--lengths", "2,9,32", "--forms",
              "LiteRT full int8,ONNX dynamic int8", *alpha)
  assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr[-3000:]
  lines = run.stdout.splitlines()
  by_length = {row["form"]: row for row in map(json.loads, (l for l in lines
                                                             if l[:1] == "{"))}
  assert set(by_length) == {"SavedModel", "LiteRT full int8", "ONNX dynamic int8"}
  for form, row in by_length.items():
    assert list(row["latency_ms"]) == ["2", "9", "32"], form
    assert any(line.startswith(f"| {form} | 1 | ") for line in lines), form
  reused(trial, work, files, out, run.stdout)
  # A length past the model's max_seq_length is refused (in prepare's child: one line).
  from export import source  # pylint: disable=import-outside-toplevel  # TensorFlow
  with pytest.raises(ValueError) as refused:
    bench_inference.length_inputs(source.load_finetuned(trial), [10, 33])
  assert str(refused.value) == ("--lengths 33: expected from 2 ([CLS], [SEP]) to the "
                                "model's max_seq_length (32) tokens")


@pytest.mark.slow
def test_dev_examples_cut_the_split_and_what_scores_it(tmp_path_factory):
  """--dev-examples N: the first N questions are read, predicted and scored; the others
  are not in the gold set (where a question without an answer would score 0)."""
  from export import source  # pylint: disable=import-outside-toplevel  # TensorFlow
  config, _ = shared_squad_model(tmp_path_factory, "squad/v2.0", "squad",
                                 TRANSFORMERS_QA_HEAD)
  loaded = source.load_finetuned(f"{config.model_dir}_1")
  split, columns, gold = bench_inference._dev_set(loaded)
  assert len(gold["ids"]) > 3
  cut_split, cut_columns, cut_gold = bench_inference._dev_set(loaded, 3)
  assert cut_split == split
  assert cut_columns == [column[:3] for column in columns]
  assert cut_gold["ids"] == gold["ids"][:3]
  assert [q["id"] for article in cut_gold["dataset"] for paragraph in article["paragraphs"]
          for q in paragraph["qas"]] == gold["ids"][:3]


def test_a_qa_head_transformers_has_no_class_of_is_refused():
  def finetuned(joint, answerable, v2):
    return types.SimpleNamespace(
        family=types.SimpleNamespace(name="qa"),
        task=types.SimpleNamespace(name="squad" if v2 else "squadv1", v2=v2),
        runner=types.SimpleNamespace(settings=types.SimpleNamespace(
            joint_prediction=joint, answerable_classifier=answerable)))
  # pylint: disable=protected-access
  assert huggingface._refusal(finetuned(True, False, False)) == (
      "huggingface takes a QA model whose ends are scored independently of its starts "
      "(ElectraForQuestionAnswering); squadv1's model predicts the end given the start: "
      "fine-tune with joint_prediction false")
  assert huggingface._refusal(finetuned(False, True, True)) == (
      "huggingface takes a QA model without an answerability classifier "
      "(ElectraForQuestionAnswering has none); squad's model has one: fine-tune with "
      "answerable_classifier false")
  # SQuAD 1.1 never reads the classifier: its model is taken.
  assert huggingface._refusal(finetuned(False, True, False)) == ""


def test_the_forms_processes_load_no_framework_they_do_not_measure():
  """bench.child imports this module in each form's process: its peak RSS and start
  must be the form's own, without TensorFlow, torch or the dev metrics' scipy and
  sklearn (which only the parent, scoring, loads)."""
  code = ("import json, sys\nfrom bench import bench_inference, child\n"
          "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))")
  run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                       text=True, check=False)
  assert run.returncode == 0, run.stderr[-2000:]
  loaded = set(json.loads(run.stdout.splitlines()[-1]))
  assert "numpy" in loaded  # what is read is the module list
  assert not loaded & {"tensorflow", "tf_keras", "torch", "transformers", "scipy",
                       "sklearn"}


def test_each_file_form_is_the_file_its_writer_writes():
  """A form's file (FILES) is the one its writer (export/registry.py WRITERS, chosen by
  writer_of) writes: a variant of a writer's FORMS by that variant's name, a writer of
  its own (LiteRT mixed int8) by its one form."""
  from export import litert, registry  # pylint: disable=import-outside-toplevel
  for form, name in bench_inference.FILES.items():
    writer = registry.WRITERS[bench_inference.writer_of(form)]
    if hasattr(writer, "FORMS"):
      assert bench_inference.variant_of(form) in writer.FORMS, form
      assert writer.file_name(bench_inference.variant_of(form)) == name, form
    else:
      assert (form, writer.NAME, litert.file_name(writer.FORM)) == (
          "LiteRT mixed int8", "litert_mixed_int8", name)
