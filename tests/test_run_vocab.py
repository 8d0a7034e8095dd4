"""A fine-tuning run's record names the vocabulary the run read, and keeps a copy of it
beside its checkpoints: a run started from a Hugging Face directory, whose data dir has
no vocab.txt, predicts and exports (ONNX, Hugging Face) with the directory's own, also
once that directory has moved; a trial whose copy is gone is one line."""

import json
import os
import shutil

import pytest
import torch
import transformers

import run_finetuning
from runs.model_files import FINETUNING_RECORD
from export import huggingface as hf_export, source
from tests.helpers import head_of, shared_path
from tools import export_lite

TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "and", "film",
          "movie", "of", "is", "it", "good", "bad"] + [f"w{i}" for i in range(105)]
HPARAMS = {"train_batch_size": 8, "max_seq_length": 16, "num_train_epochs": 1.0,
           "export_serving": False, "write_curves": False}


def hf_electra(folder):
  """A tiny random ELECTRA discriminator as save_pretrained writes it, with its own
  vocab.txt (of 120 tokens: no other vocabulary of the tests has that size)."""
  torch.manual_seed(0)
  transformers.ElectraForPreTraining(transformers.ElectraConfig(
      vocab_size=len(TOKENS), embedding_size=16, hidden_size=32, num_hidden_layers=1,
      num_attention_heads=2, intermediate_size=40, max_position_embeddings=32)
                                     ).save_pretrained(str(folder))
  (folder / "vocab.txt").write_text("".join(t + "\n" for t in TOKENS), encoding="utf-8")


@pytest.fixture(scope="module")
def from_hf(tmp_path_factory):
  """(data dir, Hugging Face dir, trial dir) of SST-2 fine-tuned briefly from the
  directory; the data dir holds no vocab.txt."""
  root = tmp_path_factory.mktemp("run_vocab")
  hf_dir, data = root / "hf", root / "data"
  hf_electra(hf_dir)
  for split, rows in (("train", 17), ("dev", 9)):
    head_of(shared_path("glue", "SST-2", f"{split}.tsv"),
            data / "finetuning_data" / "SST-2" / f"{split}.tsv", rows)
  args = ["--task", "glue/sst2", "--data-dir", str(data), "--model-name", "from_hf",
          "--init-checkpoint", str(hf_dir), "--hparams", json.dumps(HPARAMS)]
  assert run_finetuning.main(args) == 0
  trial = data / "models" / "from_hf" / "finetuning_models" / "glue_sst2_model_1"
  return data, hf_dir, trial, args


@pytest.mark.slow
def test_the_record_names_the_vocabulary_read_and_the_exports_use_it(
    from_hf, tmp_path, capsys):
  data, hf_dir, trial, args = from_hf
  vocab = (hf_dir / "vocab.txt").read_bytes()
  assert not (data / "vocab.txt").exists()
  record = json.loads((trial / FINETUNING_RECORD).read_text())
  assert record["vocab"] == "vocab.txt" and (trial / "vocab.txt").read_bytes() == vocab
  assert record["finetuning"]["vocab_file"] == str(hf_dir / "vocab.txt")

  inputs = tmp_path / "sentences.tsv"
  inputs.write_text("index\tsentence\n0\ta good film\n1\tbad and long\n")
  capsys.readouterr()
  assert run_finetuning.main([*args, "--predict", str(inputs)]) == 0
  lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
  assert [line["index"] for line in lines] == [0, 1]

  # The start moved away: the finished run still exports, with the vocabulary it read.
  hf_dir.rename(tmp_path / "hf_moved")
  try:
    assert export_lite.main(["--model-dir", str(trial), "--output",
                             str(tmp_path / "lite"), "--format", "onnx"]) == 0
    assert (tmp_path / "lite" / "vocab.txt").read_bytes() == vocab
    loaded = source.load_finetuned(str(trial), note=print)
    assert loaded.runner.tokenizer.vocab.tokens == TOKENS
    hf_export.export(str(trial), str(tmp_path / "hf_out"))
    assert (tmp_path / "hf_out" / "vocab.txt").read_bytes() == vocab
  finally:
    (tmp_path / "hf_moved").rename(hf_dir)


@pytest.mark.slow
def test_a_trial_whose_vocabulary_is_gone_is_one_line(from_hf, tmp_path, capsys):
  _, _, trial, _ = from_hf
  gone = tmp_path / "gone_1"
  shutil.copytree(trial, gone)
  os.remove(gone / "vocab.txt")
  capsys.readouterr()
  assert export_lite.main(["--model-dir", str(gone), "--output", str(tmp_path / "out"),
                           "--format", "onnx"]) == 2
  err = capsys.readouterr().err
  assert err == (f"error: {gone / FINETUNING_RECORD}: the vocabulary it names, "
                 f"{gone / 'vocab.txt'}, does not exist; put the vocab.txt the model was "
                 f"trained with at {gone / 'vocab.txt'}\n")
  assert not (tmp_path / "out").exists()
