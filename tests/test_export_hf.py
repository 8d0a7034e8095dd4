"""tools.export_hf: transformers loads each exported model with no missing or unexpected
weights and computes our outputs within 1e-4; its tokenizer gives our ids."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf
import torch
import transformers

from data_prep.tokenizer import Tokenizer
from data_prep.vocab import load_vocab
from finetune import trainer
from finetune.sentence import data as sentence_data
from finetune.sentence.data import SentenceExample
from runs.pretrained import open_weights
from tests.helpers import shared_path, write_tiny_pretrained_model
from tests.export_helpers import shared_glue_models
from tools import export_hf, reference_outputs

SENTENCES = [("The film's plot is dull, but Café Noir is great!", "A long scene."),
             ("Naïve actors can't save a ¥100 movie 中文 e.g. 3.14", None),
             ("short", "an UNUSUAL word: pseudopseudohypoparathyroidism")]


@pytest.fixture(scope="module")
def tokenizer():
  return Tokenizer(load_vocab(shared_path("vocab", "bert_uncased_vocab.txt")))


@pytest.fixture(scope="module")
def inputs(tokenizer):
  """Our featurization of SENTENCES (pairs and single, with padding), as numpy arrays."""
  examples = [SentenceExample(i, a, b, None) for i, (a, b) in enumerate(SENTENCES)]
  return sentence_data.encode(tokenizer, examples, 40)


def torch_inputs(features):
  return {"input_ids": torch.tensor(features["input_ids"], dtype=torch.long),
          "attention_mask": torch.tensor(features["input_mask"], dtype=torch.long),
          "token_type_ids": torch.tensor(features["segment_ids"], dtype=torch.long)}


def load(cls, folder):
  model, info = cls.from_pretrained(str(folder), output_loading_info=True)
  assert not info["missing_keys"] and not info["unexpected_keys"], info
  assert not info["mismatched_keys"], info
  return model.eval()


def hf_outputs(model, features):
  with torch.no_grad():
    return model(**torch_inputs(features)).logits.numpy()


def exported(checkpoint, output, *flags):
  assert export_hf.main(["--checkpoint", str(checkpoint), "--output", str(output),
                         *flags]) == 0
  return output


@pytest.mark.slow
def test_discriminator_and_generator(tmp_path, inputs, capsys):
  data = tmp_path / "data"
  data.mkdir()
  write_tiny_pretrained_model(data)
  export = data / "models" / "tiny" / "export"
  pair = open_weights(str(export)).load_pair()
  ours = {k: tf.constant(v) for k, v in inputs.items()}
  mask = inputs["input_mask"].astype(bool)

  vocab = str(data / "vocab.txt")  # the fixture's export has none beside it
  folder = exported(export, tmp_path / "disc", "--vocab", vocab)
  assert "(ElectraForPreTraining)" in capsys.readouterr().out
  theirs = hf_outputs(load(transformers.ElectraForPreTraining, folder), inputs)
  expected = pair.discriminator_logits(ours).numpy()
  np.testing.assert_allclose(theirs[mask], expected[mask], atol=1e-4)
  assert np.abs(expected[mask]).max() > 0.01  # not a trivially small comparison

  # Its files replace an earlier export's, never a folder's of other files.
  exported(export, folder, "--vocab", vocab)
  mine = tmp_path / "mine"
  mine.mkdir()
  (mine / "config.json").write_text("mine")
  (mine / "notes.txt").write_text("mine")
  capsys.readouterr()
  assert export_hf.main(["--checkpoint", str(export), "--output", str(mine),
                         "--vocab", vocab]) == 2
  assert capsys.readouterr().err == (
      f"error: --output {mine} holds what this export does not write (notes.txt); give "
      "a new or empty folder, or one of an earlier export\n")
  assert sorted(os.listdir(mine)) == ["config.json", "notes.txt"]
  assert (mine / "config.json").read_text() == "mine"

  folder = exported(export, tmp_path / "gen", "--part", "generator", "--vocab", vocab)
  config = json.loads((folder / "config.json").read_text())
  assert (config["hidden_size"], config["embedding_size"]) == (8, 16)
  theirs = hf_outputs(load(transformers.ElectraForMaskedLM, folder), inputs)
  expected = pair.generator_logits(ours).numpy()
  np.testing.assert_allclose(theirs[mask], expected[mask], atol=1e-4)


def test_tokenizer_gives_our_ids(tmp_path, inputs, capsys):
  data = tmp_path / "data"
  data.mkdir()
  write_tiny_pretrained_model(data)
  folder = exported(data / "models" / "tiny" / "export", tmp_path / "hf", "--vocab",
                    str(data / "vocab.txt"))
  capsys.readouterr()
  hf_tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
  for i, (a, b) in enumerate(SENTENCES):
    encoded = hf_tokenizer(a, b, max_length=40, padding="max_length", truncation=True)
    assert encoded["input_ids"] == inputs["input_ids"][i].tolist(), (a, b)
    assert encoded["token_type_ids"] == inputs["segment_ids"][i].tolist()
    assert encoded["attention_mask"] == inputs["input_mask"][i].tolist()


@pytest.mark.slow
@pytest.mark.parametrize("task", ["glue/sst2", "glue/stsb"])
def test_finetuned_sentence_classifier(tmp_path, tmp_path_factory, inputs, capsys, task):
  """export_helpers.shared_glue_models' SST-2 classifier and STS-B regressor."""
  config, _ = shared_glue_models(tmp_path_factory)[task]
  finetuner = trainer.Finetuner(config, log=lambda _: None)
  model = finetuner.build_model()
  finetuner.restore(model, 1)
  dev = finetuner.split(0, "dev").features
  expected = model(dev, training=False)[task].numpy()
  ours_on_sentences = model({k: tf.constant(v) for k, v in inputs.items()},
                            training=False)[task].numpy()

  folder = exported(finetuner.trial_dir(1), tmp_path / "hf")
  assert "(ElectraForSequenceClassification)" in capsys.readouterr().out
  hf_model = load(transformers.ElectraForSequenceClassification, folder)
  theirs = hf_outputs(hf_model, dev)
  if task == "glue/stsb":
    assert hf_model.config.problem_type == "regression" and hf_model.num_labels == 1
    theirs = theirs[:, 0]
  else:
    assert hf_model.config.id2label == {0: "0", 1: "1"}
    assert hf_model.config.label2id == {"0": 0, "1": 1}
  np.testing.assert_allclose(theirs, expected, atol=1e-4)
  assert np.ptp(expected) > 1e-3  # the inputs are told apart
  again = hf_outputs(hf_model, inputs)
  np.testing.assert_allclose(again[:, 0] if task == "glue/stsb" else again,
                             ours_on_sentences, atol=1e-4)

  # --part is for pre-trained checkpoints.
  capsys.readouterr()
  assert export_hf.main(["--checkpoint", finetuner.trial_dir(1), "--output",
                         str(tmp_path / "x"), "--part", "generator"]) == 2
  err = capsys.readouterr().err.strip()
  assert len(err.splitlines()) == 1 and "--part applies to pre-trained checkpoints" in err
  # Where a pre-trained model is expected, a fine-tuned one is named as such.
  np.savez(tmp_path / "in.npz", **inputs)
  assert reference_outputs.main(["--checkpoint", finetuner.trial_dir(1), "--inputs",
                                 str(tmp_path / "in.npz"), "--output",
                                 str(tmp_path / "out.npz")]) == 2
  assert capsys.readouterr().err == (
      f"error: {finetuner.trial_dir(1)}: a fine-tuned model (its folder holds "
      "finetuning_config.json); expected a pre-trained one: run_pretraining.py's model "
      "dir or its export/, a released ELECTRA checkpoint, or a Hugging Face ELECTRA "
      "directory\n")


def test_missing_checkpoint_is_one_line(tmp_path, capsys):
  assert export_hf.main(["--checkpoint", str(tmp_path / "nothing"), "--output",
                         str(tmp_path / "hf")]) == 2
  err = capsys.readouterr().err.strip()
  assert err == (f"error: {tmp_path / 'nothing'}: no such checkpoint (expected the prefix "
                 "of <prefix>.index / <prefix>.data-*, or a directory holding one)")
  assert not (tmp_path / "hf").exists()
