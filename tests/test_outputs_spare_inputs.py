"""Every output path a command takes is checked against every input path of the same
command, as the files they resolve to: writing over an input (the same path, another
spelling of it, a symlink to it, or a file of an input folder) is refused in one line
before anything runs, and the input stays as it was. An output file that names a
directory is refused as such."""

import json
import os

import numpy as np
import pytest

import run_finetuning
import run_pretraining
from model.config import ModelConfig
from model.electra import ElectraPair
from tests.helpers import tiny_vocab_text, write_reviews_task, write_tiny_pretrained_model, save_original
from tools import export_hf, reference_outputs
from tools import tokenize as tokenize_tool


def refused(capsys, code):
  """The one error line of a refused command."""
  err = capsys.readouterr().err
  assert code == 2 and err.count("\n") == 1 and err.startswith("error: "), err
  return err.strip()


@pytest.mark.slow
def test_predict_output_spares_the_file_it_predicts_and_the_task(tmp_path, capsys):
  data = tmp_path / "data"
  data.mkdir()
  write_tiny_pretrained_model(data)
  task = write_reviews_task(tmp_path, 16)
  sentences = tmp_path / "in.tsv"
  sentences.write_text("review\na fine film\n")
  link = tmp_path / "link.tsv"
  link.symlink_to(sentences)

  flags = ["--task", task, "--model-name", "tiny", "--data-dir", str(data), "--hparams",
           json.dumps({"max_seq_length": 16, "train_batch_size": 8,
                       "num_train_epochs": 1, "export_serving": False,
                       "write_curves": False})]
  assert run_finetuning.main(flags) == 0  # a model that would predict
  capsys.readouterr()

  def predict(output):
    return run_finetuning.main(flags + ["--predict", str(sentences), "--output",
                                        str(output)])
  # The same file, by another spelling and through a symlink.
  for output, shown in ((sentences, sentences), (link, link),
                        (tmp_path / "." / "in.tsv", tmp_path / "." / "in.tsv")):
    assert refused(capsys, predict(output)) == (
        f"error: --output {shown} is an input of this command (--predict: {sentences}); "
        "choose another --output")
  # The task's own files, and its description.
  assert refused(capsys, predict(tmp_path / "train.csv")) == (
      f"error: --output {tmp_path / 'train.csv'} is an input of this command (the "
      f"train file of task reviews: {tmp_path / 'train.csv'}); choose another --output")
  assert "(--task: " in refused(capsys, predict(task))
  assert sentences.read_text() == "review\na fine film\n"
  # A directory: said so, not a temporary file's name.
  assert refused(capsys, predict(tmp_path)) == (
      f"error: --output {tmp_path}: is a directory; expected a file to write")
  # Elsewhere, the predictions are written.
  assert predict(tmp_path / "out.jsonl") == 0
  assert json.loads((tmp_path / "out.jsonl").read_text())["label"] in ("bad", "good")


@pytest.fixture
def checkpoint(tmp_path):
  """A debug-size pair in the original format with its vocab.txt beside it."""
  folder = tmp_path / "ckpt"
  pair = ElectraPair(ModelConfig.from_size("debug", vocab_size=64)).build_variables()
  save_original(pair, str(folder / "model.ckpt"))
  (folder / "vocab.txt").write_text(tiny_vocab_text(64))
  with open(folder / "config.json", "w", encoding="utf-8") as f:
    json.dump(pair.model_config.to_dict(), f)
  return folder


def test_tools_outputs_spare_their_inputs(tmp_path, checkpoint, capsys):
  before = {p: p.read_bytes() for p in checkpoint.iterdir()}
  # export_hf writing its directory over the checkpoint's: config.json and vocab.txt
  # would be replaced.
  assert refused(capsys, export_hf.main(
      ["--checkpoint", str(checkpoint), "--output", str(checkpoint)])) == (
          f"error: --output {checkpoint} would write over {checkpoint / 'vocab.txt'}, an "
          f"input of this command (--checkpoint: {checkpoint}); choose another --output")
  prefix = str(checkpoint / "model.ckpt")
  assert "(--checkpoint: " in refused(capsys, export_hf.main(
      ["--checkpoint", prefix, "--output", str(checkpoint)]))
  assert {p: p.read_bytes() for p in checkpoint.iterdir()} == before
  # reference_outputs: its inputs and its config.
  inputs = tmp_path / "in.npz"
  ids = np.ones((1, 8), np.int32)
  np.savez(inputs, input_ids=ids, input_mask=ids, segment_ids=0 * ids)
  for output, flag in ((inputs, "--inputs"), (checkpoint / "config.json", "--config")):
    assert f"is an input of this command ({flag}: " in refused(
        capsys, reference_outputs.main(["--checkpoint", prefix, "--config",
                                        str(checkpoint / "config.json"), "--inputs",
                                        str(inputs), "--output", str(output)]))
  assert np.load(inputs)["input_ids"].tolist() == ids.tolist()
  # tokenize: its text and its vocabulary.
  text = tmp_path / "text.txt"
  text.write_text("t1 t2\n")
  for output, flag in ((text, "--input"), (checkpoint / "vocab.txt", "--vocab-file")):
    assert f"is an input of this command ({flag}: " in refused(
        capsys, tokenize_tool.main(["--vocab-file", str(checkpoint / "vocab.txt"),
                                    "--input", str(text), "--output", str(output)]))
  assert text.read_text() == "t1 t2\n"
  assert {p: p.read_bytes() for p in checkpoint.iterdir()} == before


def test_pretraining_export_spares_its_inputs(tmp_path, capsys):
  """The run exports at its end: a vocabulary or init checkpoint inside the folder the
  export rewrites is refused before anything runs, not after hours of training."""
  export = tmp_path / "models" / "x" / "export"
  export.mkdir(parents=True)
  (export / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\n")
  for hparams, name in (({"vocab_file": str(export / "vocab.txt")}, "vocab_file"),
                        ({"init_checkpoint": str(export)}, "init_checkpoint")):
    code = run_pretraining.main(["--model-name", "x", "--data-dir", str(tmp_path),
                                 "--hparams", json.dumps(hparams)])
    assert refused(capsys, code).endswith(
        f"an input of this command ({name}: {hparams[name]}); copy it out of the export "
        "folder first, or use another model_dir")
  assert sorted(os.listdir(tmp_path / "models" / "x")) == ["export"]
