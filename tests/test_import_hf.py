"""Hugging Face ELECTRA directories in: checkpoints built by transformers itself (random
init, tiny sizes) load through the mapping table and give transformers' outputs within
1e-4; ours -> HF -> ours is bit-identical; pre-training takes the generator's size from
the weights; a BERT directory fine-tunes as a discriminator's encoder (transformers'
BertModel's states, BERT's tokenizer's ids) and is refused where more is needed; bad
directories are refused in one line naming the file and weight."""

import json
import os
import shutil

import numpy as np
import pytest
import safetensors.numpy
import tensorflow as tf
import torch
import transformers

from finetune import config as finetune_config
from finetune import trainer as finetune_trainer
from model.config import ModelConfig
from model.electra import ElectraPair
from runs.pretrained import open_weights
from model.weights.original import original_variables
from runs.start import open_start
from pretrain import config_fitting
from pretrain.config import load_config
from tests.helpers import bert_dir, make_data_dir, shared_path, save_original
from tools import export_hf, reference_outputs

SIZES = dict(vocab_size=120, embedding_size=16, max_position_embeddings=24,
             type_vocab_size=2, hidden_act="gelu")


def hf_pair(folder, generator_hidden=16, generator_layers=1, same_embeddings=True):
  """folder/discriminator and folder/generator, as save_pretrained writes them; the
  generator's sizes follow its width (heads max(1, h // 64), inner 4h) as released."""
  torch.manual_seed(0)
  disc = transformers.ElectraForPreTraining(transformers.ElectraConfig(
      hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=40,
      **SIZES)).eval()
  gen = transformers.ElectraForMaskedLM(transformers.ElectraConfig(
      hidden_size=generator_hidden, num_hidden_layers=generator_layers,
      num_attention_heads=1, intermediate_size=4 * generator_hidden, **SIZES)).eval()
  if same_embeddings:  # shared in pre-training, so equal in released pairs
    gen.electra.embeddings.load_state_dict(disc.electra.embeddings.state_dict())
  disc.save_pretrained(str(folder / "discriminator"))
  gen.save_pretrained(str(folder / "generator"))
  return disc, gen


def batch(seed=1):
  rng = np.random.default_rng(seed)
  ids = rng.integers(5, SIZES["vocab_size"], [2, 12]).astype(np.int32)
  mask = np.ones_like(ids)
  mask[1, 9:] = 0
  segments = np.zeros_like(ids)
  segments[:, 6:] = 1
  return {"input_ids": ids, "input_mask": mask, "segment_ids": segments}


def torch_outputs(model, inputs):
  with torch.no_grad():
    return model(input_ids=torch.tensor(inputs["input_ids"], dtype=torch.long),
                 attention_mask=torch.tensor(inputs["input_mask"], dtype=torch.long),
                 token_type_ids=torch.tensor(inputs["segment_ids"], dtype=torch.long))


def test_pair_from_transformers_matches_it(tmp_path, capsys):
  disc, gen = hf_pair(tmp_path)
  config = open_weights(str(tmp_path)).model_config()
  assert (config.hidden_size, config.num_attention_heads, config.intermediate_size,
          config.generator_hidden_size, config.generator_layers) == (32, 2, 40, 0.5, 0.5)
  inputs = batch()
  np.savez(tmp_path / "in.npz", **inputs)
  assert reference_outputs.main(["--checkpoint", str(tmp_path), "--inputs",
                                 str(tmp_path / "in.npz"), "--output",
                                 str(tmp_path / "out.npz")]) == 0
  ours = np.load(tmp_path / "out.npz")
  real = inputs["input_mask"].astype(bool)
  theirs = torch_outputs(disc, inputs).logits.numpy()
  np.testing.assert_allclose(ours["discriminator_logits"][real], theirs[real], atol=1e-4)
  assert np.abs(theirs).max() > 0.01
  theirs = torch_outputs(gen, inputs).logits.numpy()
  np.testing.assert_allclose(ours["generator_logits"][real], theirs[real], atol=1e-4)

  # The discriminator's directory alone (the common download): its two outputs, and a
  # line saying what needs the generator.
  capsys.readouterr()
  assert reference_outputs.main(["--checkpoint", str(tmp_path / "discriminator"),
                                 "--inputs", str(tmp_path / "in.npz"), "--output",
                                 str(tmp_path / "disc.npz")]) == 0
  assert capsys.readouterr().out.splitlines()[0] == (
      f"note: {tmp_path / 'discriminator'} holds the discriminator only: "
      "generator_hidden and generator_logits are not written (they need the generator: "
      "give a folder holding both Hugging Face directories, or the whole pre-trained "
      "pair)")
  alone = np.load(tmp_path / "disc.npz")
  assert sorted(alone) == ["discriminator_hidden", "discriminator_logits"]
  for name in alone:
    np.testing.assert_array_equal(alone[name], ours[name])

  # Fine-tuning's encoder from the discriminator directory alone (pytorch_model.bin too).
  disc.save_pretrained(str(tmp_path / "bin"), safe_serialization=False)
  for folder in ("discriminator", "bin"):
    path = str(tmp_path / folder)
    encoder = ElectraPair(open_weights(path).model_config("discriminator")) \
        .build_variables().discriminator
    assert open_weights(path).load_encoder(encoder) == path
    hidden = encoder({k: tf.constant(v) for k, v in inputs.items()}, training=False)
    expected = torch_outputs(disc.electra, inputs).last_hidden_state.numpy()
    np.testing.assert_allclose(hidden.numpy()[real], expected[real], atol=1e-4)
  capsys.readouterr()


def test_round_trip_is_bit_identical(tmp_path, capsys):
  config = ModelConfig.from_dict(dict(SIZES, hidden_size=32, num_hidden_layers=2,
                                      generator_hidden_size=0.5))
  pair = ElectraPair(config).build_variables()
  save_original(pair, str(tmp_path / "ours" / "model.ckpt"))
  vocab = tmp_path / "vocab.txt"
  vocab.write_text("".join(f"{t}\n" for t in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
                           + [f"t{i}" for i in range(5, SIZES["vocab_size"])]))
  for part in ("discriminator", "generator"):
    assert export_hf.main(["--checkpoint", str(tmp_path / "ours"), "--output",
                           str(tmp_path / "hf" / part), "--part", part,
                           "--vocab", str(vocab)]) == 0
  again = open_weights(str(tmp_path / "hf")).load_pair()
  assert again.model_config == config
  before = original_variables(pair)
  after = original_variables(again)
  assert [n for n, _, _ in before] == [n for n, _, _ in after]
  for (name, a, _), (_, b, _) in zip(before, after):
    assert np.array_equal(a.numpy(), b.numpy()), name
  # Fine-tuning from the folder finds its vocab.txt inside the discriminator's directory.
  config = finetune_config.load_config(
      "small", ["glue/sst2"], str(tmp_path / "no_data"),
      {"init_checkpoint": str(tmp_path / "hf"), "max_seq_length": 16})
  assert finetune_trainer.Finetuner(config).vocab_file() == str(
      tmp_path / "hf" / "discriminator" / "vocab.txt")
  capsys.readouterr()


def error_of(capsys, checkpoint, tmp_path):
  capsys.readouterr()  # transformers' saving progress
  np.savez(tmp_path / "in.npz", **batch())
  assert reference_outputs.main(["--checkpoint", str(checkpoint), "--inputs",
                                 str(tmp_path / "in.npz"), "--output",
                                 str(tmp_path / "out.npz")]) == 2
  err = capsys.readouterr().err.strip()
  assert len(err.splitlines()) == 1, err
  assert not (tmp_path / "out.npz").exists()
  return err


def mrpc_data_dir(tmp_path, rows):
  """<tmp>/data/finetuning_data/MRPC with the shared train and dev files' first rows."""
  folder = tmp_path / "data" / "finetuning_data" / "MRPC"
  folder.mkdir(parents=True)
  for split in ("train", "dev"):
    with open(shared_path("glue", "MRPC", f"{split}.tsv"), "rb") as f:
      (folder / f"{split}.tsv").write_bytes(b"".join(f.readlines()[:rows + 1]))
  return tmp_path / "data"


@pytest.mark.slow
def test_bert_directory_fine_tunes_as_a_discriminator_encoder(tmp_path, capsys):
  import run_finetuning  # pylint: disable=g-import-not-at-top
  data = mrpc_data_dir(tmp_path, 16)
  # A bare BertModel (embeddings.*, encoder.*, pooler.*) and BERT's pre-training model
  # (bert.-scoped, with its heads) as pytorch_model.bin.
  for name, model_class, save in (("bare", transformers.BertModel, {}),
                                  ("pretraining", transformers.BertForPreTraining,
                                   {"safe_serialization": False})):
    folder = tmp_path / name
    bert = bert_dir(folder, model_class, **save)
    bert = getattr(bert, "bert", bert)
    config = finetune_config.load_config("tiny", ["glue/mrpc"], str(data), {
        "init_checkpoint": str(folder), "vocab_file": str(folder / "vocab.txt")})
    finetuner = finetune_trainer.Finetuner(config)
    assert finetuner.model_config.hidden_size == 32
    assert finetuner.model_config.embedding_width == 32  # no embeddings_project
    features = finetuner.split(0, "dev").features
    # Our featurization is BERT's tokenizer's, ids and segments alike.
    examples = finetuner.split(0, "dev").examples
    theirs = transformers.BertTokenizer(str(folder / "vocab.txt"))(
        [e.text_a for e in examples], [e.text_b for e in examples], padding="max_length",
        max_length=config.max_seq_length, truncation=True, return_tensors="np")
    np.testing.assert_array_equal(features["input_ids"], theirs["input_ids"])
    np.testing.assert_array_equal(features["segment_ids"], theirs["token_type_ids"])
    np.testing.assert_array_equal(features["input_mask"], theirs["attention_mask"])
    model = finetuner.build_model(features)
    capsys.readouterr()
    assert model.load_pretrained(finetuner.start.weights) == str(folder)
    weights_file = next(folder / f for f in ("model.safetensors", "pytorch_model.bin")
                        if os.path.isfile(folder / f))
    # The pooler's 2; + the masked-LM and next-sentence heads' 7 saved (decoder tied).
    unread = {"bare": 2, "pretraining": 9}[name]
    assert capsys.readouterr().out == (
        f"note: {weights_file}: BERT's pooler and heads ({unread} weights) are not read: "
        "a fine-tuning head reads the [CLS] state itself\n")
    inputs = {k: features[k] for k in ("input_ids", "input_mask", "segment_ids")}
    ours = model.encoder({k: tf.constant(v) for k, v in inputs.items()}, training=False)
    expected = torch_outputs(bert, inputs).last_hidden_state.numpy()
    real = inputs["input_mask"].astype(bool)
    np.testing.assert_allclose(ours.numpy()[real], expected[real], atol=1e-4)
    assert np.abs(expected[real]).max() > 0.5

  # The command fine-tunes from it (16 pairs in both orders: 4 steps of 8).
  hparams = {"train_batch_size": 8, "num_train_epochs": 1, "export_serving": False,
             "write_curves": False}
  assert run_finetuning.main([
      "--task", "glue/mrpc", "--data-dir", str(data), "--model-name", "from_bert",
      "--init-checkpoint", str(tmp_path / "pretraining"),
      "--hparams", json.dumps(hparams)]) == 0
  results = json.loads((data / "models" / "from_bert" / "results" /
                        "glue_mrpc_results.json").read_text())
  assert 0 <= results["summary"]["glue/mrpc dev accuracy"]["median"] <= 100
  capsys.readouterr()


def test_bert_directory_is_refused_where_more_than_the_encoder_is_needed(tmp_path,
                                                                           capsys):
  import run_pretraining  # pylint: disable=g-import-not-at-top
  bert = tmp_path / "bert"
  bert_dir(bert, transformers.BertForMaskedLM)
  # The discriminator's outputs need its head.
  assert error_of(capsys, bert, tmp_path) == (
      f"error: {bert}/config.json: model_type \"bert\" is read as a discriminator's "
      "encoder, for fine-tuning only; the discriminator's head (discriminator_predictions)"
      " is ELECTRA's, and a BERT directory has none")
  # Pre-training from it needs a generator.
  data_dir, _ = make_data_dir(tmp_path / "data", 64, num_lines=100, shards=1)
  hparams = {"debug": True, "max_seq_length": 64, "do_train": False, "do_eval": True}
  capsys.readouterr()
  assert run_pretraining.main(["--data-dir", data_dir, "--model-name", "from_bert",
                               "--init-checkpoint", str(bert),
                               "--hparams", json.dumps(hparams)]) == 2
  err = capsys.readouterr().err.strip()
  assert err == (
      f"error: {bert}/config.json: model_type \"bert\" is read as a discriminator's "
      "encoder, for fine-tuning only; the generator this needs is ELECTRA's, and a BERT "
      "directory has none"), err


def test_bad_directories_one_line(tmp_path, capsys):
  roberta = tmp_path / "roberta"
  transformers.RobertaForMaskedLM(transformers.RobertaConfig(
      vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=1,
      intermediate_size=32)).save_pretrained(str(roberta))
  assert error_of(capsys, roberta, tmp_path) == (
      f"error: {roberta}/config.json: model_type 'roberta' (RobertaForMaskedLM), not "
      "ELECTRA; expected a Hugging Face ELECTRA directory (model_type \"electra\"), or "
      "BERT's (\"bert\") to fine-tune")

  pair = tmp_path / "pair"
  hf_pair(pair)

  weights_file = pair / "generator" / "model.safetensors"
  weights = safetensors.numpy.load_file(str(weights_file))
  query = "electra.encoder.layer.0.attention.self.query.weight"
  gone = {k: v for k, v in weights.items() if k != query}
  weights_file.write_bytes(safetensors.numpy.save(gone))
  assert error_of(capsys, pair, tmp_path) == (
      f"error: {weights_file}: 1 weight(s) the pair needs are missing: {query}")

  weights_file.write_bytes(safetensors.numpy.save(
      {**weights, query: np.zeros([16, 8], np.float32)}))
  assert error_of(capsys, pair, tmp_path) == (
      f"error: {weights_file}: 1 weight(s) with the wrong shape for its config.json: "
      f"{query} has [16, 8], expected [16, 16]")

  other = tmp_path / "other"
  hf_pair(other, same_embeddings=False)
  assert error_of(capsys, other, tmp_path) == (
      f"error: {other}/generator/model.safetensors: 3 embedding weight(s) differ from "
      "the discriminator's, which the generator shares in ELECTRA: "
      "electra.embeddings.position_embeddings.weight, "
      "electra.embeddings.token_type_embeddings.weight, "
      "electra.embeddings.word_embeddings.weight")

  # A downloaded directory that lost its config.json: said so, not "no *.index file".
  lost = tmp_path / "lost_config"
  shutil.copytree(pair / "discriminator", lost)
  (lost / "config.json").unlink()
  assert error_of(capsys, lost, tmp_path) == (
      f"error: {lost}: {lost}/model.safetensors is Hugging Face weights without their "
      "config.json: a Hugging Face directory needs the config.json downloaded with "
      f"them, in {lost}")

  config_file = pair / "generator" / "config.json"
  weights_file.write_bytes(safetensors.numpy.save(weights))
  config = json.loads(config_file.read_text())
  config_file.write_text(json.dumps({**config, "num_attention_heads": 2}))
  assert error_of(capsys, pair, tmp_path) == (
      f"error: {config_file}: num_attention_heads 2, but a generator of hidden size 16 "
      "beside this discriminator has 1")


@pytest.mark.slow
def test_pretraining_continues_from_hf_pair(tmp_path, capsys):
  """Released ELECTRA-Small's generator is full width: the run takes its size from the
  weights (the configured 0.25 would not fit) and evaluates the loaded pair."""
  import run_pretraining  # pylint: disable=g-import-not-at-top
  data_dir, vocab_size = make_data_dir(tmp_path / "data", 64, num_lines=100, shards=1)
  sizes = dict(SIZES, vocab_size=vocab_size, max_position_embeddings=512,
               embedding_size=32, num_hidden_layers=1, num_attention_heads=1,
               hidden_size=64)
  folder = tmp_path / "electra-hf"
  torch.manual_seed(0)
  disc = transformers.ElectraForPreTraining(transformers.ElectraConfig(
      intermediate_size=128, **sizes))
  gen = transformers.ElectraForMaskedLM(transformers.ElectraConfig(
      intermediate_size=256, **sizes))
  gen.electra.embeddings.load_state_dict(disc.electra.embeddings.state_dict())
  disc.save_pretrained(str(folder / "electra-discriminator"))
  gen.save_pretrained(str(folder / "electra-generator"))
  model = {"hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 1,
           "intermediate_size": 128}
  hparams = {"debug": True, "max_seq_length": 64, "eval_batch_size": 8,
             "num_eval_steps": 1, "do_train": False, "do_eval": True,
             "embedding_size": 32, "model_hparam_overrides": model}
  args = ["--data-dir", data_dir, "--model-name", "continued", "--init-checkpoint",
          str(folder)]
  capsys.readouterr()
  assert run_pretraining.main(args + ["--hparams", json.dumps(hparams)]) == 0
  out = capsys.readouterr().out
  assert (f"from init_checkpoint {folder}: generator_hidden_size 1.0 (configured 0.25)"
          in out)
  assert f"initialized the generator and discriminator from {folder}" in out
  config = config_fitting.fit_to_start(load_config("continued", data_dir, dict(
      hparams, init_checkpoint=str(folder), vocab_size=vocab_size)),
                                open_start(str(folder)))
  assert (config.generator_hidden_size, config.model_config().generator_config()
          .hidden_size) == (1.0, 64)
  assert (tmp_path / "data" / "models" / "continued" / "results" /
          "unsup_results.txt").is_file()

  wrong = dict(hparams, model_hparam_overrides=dict(model, intermediate_size=96))
  assert run_pretraining.main(args + ["--hparams", json.dumps(wrong)]) == 2
  assert capsys.readouterr().err.strip().splitlines()[-1] == (
      f"error: init_checkpoint {folder} has intermediate_size 128 (configured 96); set "
      "\"model_hparam_overrides\": {\"intermediate_size\": 128} (or the model_size it "
      "was pre-trained at)")
