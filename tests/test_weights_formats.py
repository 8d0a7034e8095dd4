"""model/weights/: each format claims its own paths and no other's, reads them, and the
formats list opens every one; a path no format claims is refused in one line."""

import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from model.config import ModelConfig
from model.electra import ElectraPair
from model.weights import CheckpointError, huggingface, original
from model.weights.formats import FORMATS
from model.weights.original import original_variables
from runs import pretrained as run_dir
from runs.model_files import FINETUNING_RECORD, PRETRAINING_RECORD
from runs.pretrained import open_weights
from export import huggingface as hf_export
from tests.helpers import tiny_vocab_text, save_original

CONFIG = ModelConfig.from_dict(dict(vocab_size=30, hidden_size=16, num_hidden_layers=2,
                                    num_attention_heads=1, intermediate_size=32,
                                    embedding_size=8, max_position_embeddings=16,
                                    generator_hidden_size=0.5))


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
  """One pair saved in each format, a fine-tuned model dir, and paths of none."""
  root = tmp_path_factory.mktemp("formats")
  pair = ElectraPair(CONFIG).build_variables()
  vocab = root / "original" / "vocab.txt"
  prefix = save_original(pair, str(root / "original" / "model.ckpt-3"))
  vocab.write_text(tiny_vocab_text(CONFIG.vocab_size))
  for part in ("discriminator", "generator"):
    hf_export.export(str(root / "original"), str(root / "hf" / part), part)
  # A pre-training run dir as the loop leaves it: its record and ckpt-<step>, the
  # model's object graph holding the pair as `electra`.
  run = root / "run"
  manager = tf.train.CheckpointManager(
      tf.train.Checkpoint(model=tf.train.Checkpoint(electra=pair)), str(run), 1,
      checkpoint_name="ckpt")
  run_prefix = manager.save(checkpoint_number=5)
  (run / PRETRAINING_RECORD).write_text(json.dumps({
      "signature": {"model": CONFIG.to_dict(), "electra_objective": True},
      "config": {"vocab_file": str(vocab)}, "trained_part": "pair"}))
  finetuned = root / "finetuned"
  shutil.copytree(run, finetuned)
  (finetuned / PRETRAINING_RECORD).rename(finetuned / FINETUNING_RECORD)
  (root / "empty").mkdir()
  return dict(pair=pair, vocab=str(vocab), original=str(root / "original"),
              prefix=prefix, hf=str(root / "hf"),
              hf_discriminator=str(root / "hf" / "discriminator"), run=str(run),
              run_prefix=run_prefix, finetuned=str(finetuned),
              empty=str(root / "empty"), nowhere=str(root / "nowhere" / "model.ckpt"))


def others(paths, *own):
  return [paths[name] for name in ("original", "prefix", "hf", "hf_discriminator", "run",
                                   "run_prefix", "empty", "nowhere") if name not in own]


def assert_loads_the_pair(weights, pair):
  again = weights.load_pair()
  assert again.model_config == pair.model_config
  for (name, want, _), (_, got, _) in zip(original_variables(pair),
                                           original_variables(again)):
    np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=name)


def test_original_claims_checkpoint_prefixes_and_their_folders(paths):
  prefix = paths["prefix"]
  for path in (paths["original"], prefix, prefix + ".index"):
    assert original.locate(path) == prefix
  # A run dir's training checkpoints are runs/pretrained.py's, asked before it.
  for path in others(paths, "original", "prefix", "run", "run_prefix"):
    assert original.locate(path) is None, path
  weights = open_weights(paths["original"])
  assert (weights.format, weights.part_held()) == (original, "pair")
  assert weights.vocab() == paths["vocab"]
  assert_loads_the_pair(weights, paths["pair"])


def test_huggingface_claims_its_directories_and_folders_of_two(paths):
  assert huggingface.locate(paths["hf"]) == paths["hf"]
  assert huggingface.part_held(paths["hf"]) == "pair"
  assert huggingface.locate(paths["hf_discriminator"]) == paths["hf_discriminator"]
  assert huggingface.part_held(paths["hf_discriminator"]) == "discriminator"
  for path in others(paths, "hf", "hf_discriminator") + [paths["finetuned"]]:
    assert huggingface.locate(path) is None, path
  weights = open_weights(paths["hf"])
  assert weights.format is huggingface
  assert weights.vocab() == os.path.join(paths["hf_discriminator"], "vocab.txt")
  assert_loads_the_pair(weights, paths["pair"])


def test_huggingface_weights_without_their_config_are_named(paths, tmp_path):
  shutil.copy(os.path.join(paths["hf_discriminator"], "model.safetensors"), tmp_path)
  with pytest.raises(CheckpointError, match="Hugging Face weights without their "
                     "config.json"):
    huggingface.locate(str(tmp_path))


def test_run_dir_claims_pretraining_runs_and_refuses_a_finetuned_one(paths):
  for path in (paths["run"], paths["run_prefix"]):
    assert run_dir.locate(path) == paths["run_prefix"]
  for path in others(paths, "run", "run_prefix"):
    assert run_dir.locate(path) is None, path
  with pytest.raises(CheckpointError, match="a fine-tuned model"):
    run_dir.locate(paths["finetuned"])
  weights = open_weights(paths["run"])
  assert (weights.format, weights.part_held()) == (run_dir, "pair")
  assert weights.vocab() == paths["vocab"]
  assert_loads_the_pair(weights, paths["pair"])


def test_a_runs_part_is_what_its_objective_recorded(paths, tmp_path):
  run = tmp_path / "run"
  shutil.copytree(paths["run"], run)
  record = json.loads((run / PRETRAINING_RECORD).read_text())
  prefix = os.path.join(str(run), os.path.basename(paths["run_prefix"]))
  assert run_dir.part_held(prefix) == "pair"
  (run / PRETRAINING_RECORD).write_text(json.dumps({**record, "trained_part": "generator"}))
  weights = open_weights(str(run))
  assert weights.part_held() == "generator"
  with pytest.raises(CheckpointError, match="trained the generator only"):
    weights.load_pair()


def test_a_path_no_format_claims_is_refused_in_one_line(paths):
  assert FORMATS == [huggingface, run_dir, original]
  for path, message in ((paths["empty"], "directory holds no checkpoint"),
                        (paths["nowhere"], "no such checkpoint"), ("", "no checkpoint "
                                                                   "path given")):
    with pytest.raises(CheckpointError, match=message) as info:
      open_weights(path)
    assert "\n" not in str(info.value)
