"""bench.bench_inference's inputs: each bad flag one line at parse time, a model it
cannot take refused in its child's own line with nothing left behind, and its work
folder keyed on the model (another model's or an incomplete export is rebuilt)."""

import json
import os
import subprocess
import sys

import pytest

from bench import bench_inference
from tests.conftest import ROOT


def bench(*flags: str) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, "-m", "bench.bench_inference", *flags],
                        cwd=ROOT, capture_output=True, text=True, timeout=900,
                        check=False)


@pytest.mark.parametrize("flags,message", [
    (["--threads", "abc"], "argument --threads: 'abc': expected thread counts of at "
     "least 1, comma-separated, such as 1,2"),
    (["--threads", "1,0"], "argument --threads: '1,0': expected thread counts of at "
     "least 1, comma-separated, such as 1,2"),
    (["--sentences", "0"], "--sentences 0: expected an integer >= 1"),
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


def test_a_model_the_bench_cannot_take_is_its_childs_one_line(tmp_path):
  pretraining = tmp_path / "pretraining"
  pretraining.mkdir()
  (pretraining / "pretrain_config.json").write_text("{}")
  qa = tmp_path / "models" / "m" / "finetuning_models" / "squad_model_1"
  qa.mkdir(parents=True)
  (qa / "finetuning_config.json").write_text(json.dumps(
      {"finetuning": {"task_names": ["squad"]}, "model": {}}))
  work = tmp_path / "work"
  for trial, message in (
      (pretraining, f"{pretraining} is a pre-training model dir, not a fine-tuned model; "
       f"fine-tune it first (python run_finetuning.py --task TASK --init-checkpoint "
       f"{pretraining}) and give the fine-tuned trial's dir (<model_dir>_1)"),
      (qa, f"{qa}: fine-tuned on squad; the bench takes a sentence task's model")):
    run = bench("--model-dir", str(trial), "--work-dir", str(work))
    assert (run.returncode, run.stderr.splitlines()[-1:]) == (2, [f"error: {message}"])
    assert "Traceback" not in run.stderr and run.stdout == ""
    assert not work.exists()  # nothing left behind


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
  (folder / "dev_texts.json").write_text("[]")
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
