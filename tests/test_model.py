"""The Keras model against an independent NumPy forward pass, checkpoint round trips,
parameter counts, embedding sharing, and the errors for bad checkpoints."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from model.config import ModelConfig
from model.electra import DiscriminatorHead, ElectraPair
from model.encoder import ElectraEncoder
from model.weights import CheckpointError
from runs.pretrained import open_weights
from tools import reference_outputs
from tests import numpy_electra
from tests.helpers import TINY, make_checkpoint, padded_batch, run_as_main, save_original

# electra_small with the released model's generator (generator_hidden_size 1.0 there;
# 0.25 here so the generator has its own, smaller size and heads).
SMALL = dict(vocab=30522, emb=128, hidden=256, layers=12, inner=1024, gen_hidden=64,
             gen_layers=12, gen_inner=256)


@pytest.fixture(scope="module")
def small_checkpoint(tmp_path_factory):
  """SMALL's checkpoint (folder, prefix, weights): seconds to write, read by two tests."""
  folder = tmp_path_factory.mktemp("small")
  return (folder, *make_checkpoint(folder, SMALL))


@pytest.mark.parametrize("sizes", [TINY, SMALL], ids=["tiny", "small"])
def test_keras_matches_numpy_reference(tmp_path, sizes, request):
  if sizes is SMALL:
    folder, _, weights = request.getfixturevalue("small_checkpoint")
  else:
    folder, (_, weights) = tmp_path, make_checkpoint(tmp_path, sizes)
  inputs = padded_batch(sizes["vocab"])
  got = reference_outputs.compute(str(folder), inputs)  # sizes inferred from shapes
  want = numpy_electra.forward(weights, **inputs,
                               disc_heads=max(1, sizes["hidden"] // 64),
                               gen_heads=max(1, sizes["gen_hidden"] // 64))
  for name, value in want.items():
    assert got[name].shape == value.shape, name
    assert got[name].dtype == np.float32
    np.testing.assert_allclose(got[name], value, rtol=0, atol=1e-5, err_msg=name)


def test_untied_generator_embeddings_match_numpy(tmp_path):
  prefix, weights = make_checkpoint(tmp_path, TINY, untied_gen_embeddings=True)
  config = open_weights(prefix).model_config()
  assert config.untied_generator_embeddings
  inputs = padded_batch(TINY["vocab"])
  got = reference_outputs.compute(prefix, inputs)
  want = numpy_electra.forward(weights, **inputs, disc_heads=1, gen_heads=1,
                               gen_embedding_scope="generator")
  for name, value in want.items():
    np.testing.assert_allclose(got[name], value, rtol=0, atol=1e-5, err_msg=name)


def test_inferred_config_follows_the_original_rules(small_checkpoint):
  _, prefix, _ = small_checkpoint
  config = open_weights(prefix).model_config()
  assert (config.vocab_size, config.embedding_size, config.hidden_size) == (30522, 128, 256)
  assert (config.num_hidden_layers, config.num_attention_heads) == (12, 4)
  gen = config.generator_config()
  assert (gen.hidden_size, gen.num_hidden_layers, gen.num_attention_heads) == (64, 12, 1)
  assert gen.intermediate_size == 256 and gen.embedding_size == 128


@pytest.mark.slow
def test_reference_outputs_command(tmp_path, capsys):
  prefix, weights = make_checkpoint(tmp_path, TINY)
  inputs = padded_batch(TINY["vocab"])
  np.savez(tmp_path / "in.npz", **inputs)
  config = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 1,
            "intermediate_size": 128, "vocab_size": 97, "max_position_embeddings": 40,
            "type_vocab_size": 2, "embedding_size": 24, "generator_hidden_size": 0.5,
            "generator_layers": 1.0, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
            "attention_probs_dropout_prob": 0.1, "initializer_range": 0.02}
  (tmp_path / "config.json").write_text(json.dumps(config))
  # The command as -m runs it, in this process: TensorFlow is loaded already.
  assert run_as_main("tools.reference_outputs", [
      "--checkpoint", prefix, "--config", str(tmp_path / "config.json"), "--inputs",
      str(tmp_path / "in.npz"), "--output", str(tmp_path / "out.npz")]) == 0, (
          capsys.readouterr().err)
  got = np.load(tmp_path / "out.npz")
  want = numpy_electra.forward(weights, **inputs, disc_heads=1, gen_heads=1)
  assert sorted(got.files) == sorted(want)
  for name, value in want.items():
    np.testing.assert_allclose(got[name], value, rtol=0, atol=1e-5, err_msg=name)

  # A config that does not fit the checkpoint: the command's refusal.
  config["hidden_size"] = 64
  (tmp_path / "config.json").write_text(json.dumps(config))
  capsys.readouterr()
  assert reference_outputs.main(
      ["--checkpoint", prefix, "--config", str(tmp_path / "config.json"), "--inputs",
       str(tmp_path / "in.npz"), "--output", str(tmp_path / "bad.npz")]) == 2
  err = capsys.readouterr().err
  assert err.startswith("error: ") and err.count("\n") == 1 and "wrong shape" in err
  assert not (tmp_path / "bad.npz").exists()


def test_reference_outputs_refuses_ids_outside_the_embeddings(tmp_path, capsys):
  prefix, _ = make_checkpoint(tmp_path, TINY)
  inputs = padded_batch(TINY["vocab"])
  inputs["segment_ids"][0, -1] = 2  # type_vocab_size is 2
  np.savez(tmp_path / "in.npz", **inputs)
  args = ["--checkpoint", prefix, "--inputs", str(tmp_path / "in.npz"), "--output",
          str(tmp_path / "out.npz")]
  assert reference_outputs.main(args) == 2
  assert capsys.readouterr().err == ("error: segment_ids outside [0, 2) for this "
                                     "checkpoint's type_vocab_size (found 0..2)\n")
  assert not (tmp_path / "out.npz").exists()


def test_round_trip_keeps_names_shapes_and_values(tmp_path):
  config = ModelConfig.from_dict(dict(vocab_size=97, hidden_size=32, num_hidden_layers=2,
                                      embedding_size=24, generator_hidden_size=0.5,
                                      max_position_embeddings=40))
  pair = ElectraPair(config).build_variables()
  prefix = save_original(pair, str(tmp_path / "out" / "model.ckpt"), global_step=7)
  listed = dict(tf.train.list_variables(prefix))
  want = numpy_electra.original_shapes(**TINY)
  assert listed.pop("global_step") == []
  assert {k: tuple(v) for k, v in listed.items()} == want
  assert tf.train.latest_checkpoint(str(tmp_path / "out")) == prefix

  again = ElectraPair(config).build_variables()
  open_weights(str(tmp_path / "out")).load_into(again)
  for a, b in zip(pair.weights, again.weights):
    np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.name)


@pytest.mark.parametrize("size,expected", [("small", 13_548_800), ("base", 109_482_240),
                                           ("large", 335_141_888)])
def test_discriminator_parameter_counts(size, expected):
  """The published figure counts the encoder (embeddings included) plus the head's
  H x H dense layer, the same size as BERT's pooler; the head's 1-unit output layer
  adds H + 1 more. Built in a graph: counting needs the shapes, not the values (eager
  Keras would draw all 335M initial values of the large model)."""
  config = ModelConfig.from_size(size)
  with tf.Graph().as_default():
    encoder, head = ElectraEncoder(config), DiscriminatorHead(config)
    head(encoder(ElectraPair.dummy_inputs(), training=False))
  count = lambda variables: sum(int(np.prod(v.shape)) for v in variables)
  h = config.hidden_size
  assert count(encoder.trainable_variables) + count(head.dense.trainable_variables) \
      == expected
  assert count(head.dense_1.trainable_variables) == h + 1


def test_embeddings_are_shared_once():
  config = ModelConfig.from_size("debug", vocab_size=101)
  pair = ElectraPair(config).build_variables()
  ids = [id(v) for v in pair.trainable_variables]
  assert len(ids) == len(set(ids))
  tables = [v for v in pair.trainable_variables if v.shape == (101, config.embedding_width)]
  assert len(tables) == 1 and tables[0] is pair.generator.embedding_table
  assert pair.generator.embeddings is pair.discriminator.embeddings
  assert pair.generator.embeddings_project is not None  # 144 -> 36

  untied = ElectraPair(ModelConfig.from_size("debug", vocab_size=101,
                                             untied_generator_embeddings=True))
  untied.build_variables()
  assert untied.generator.embedding_table is not untied.discriminator.embedding_table
  assert untied.generator.embedding_table.shape == (101, 36)

  tied = ElectraPair(ModelConfig.from_size("debug", vocab_size=101,
                                           untied_generator=False)).build_variables()
  assert tied.generator is tied.discriminator
  assert len(tied.trainable_variables) == len({id(v) for v in tied.trainable_variables})


def test_adam_slots_and_global_step_are_ignored(tmp_path):
  shapes = numpy_electra.original_shapes(**TINY)
  weights = numpy_electra.random_weights(shapes)
  slots = {f"{n}/adam_{s}": np.zeros_like(v) for n, v in list(weights.items())[:5]
           for s in "mv"}
  prefix = numpy_electra.write_tf1_checkpoint(weights, str(tmp_path / "m"), slots)
  pair = open_weights(prefix).load_pair()
  np.testing.assert_array_equal(pair.generator_head.output_bias.numpy(),
                                weights["generator_predictions/output_bias"])


def test_parts_load_alone(tmp_path):
  prefix, weights = make_checkpoint(tmp_path / "gen", TINY, discriminator=False)
  pair = open_weights(prefix).load_pair(part="generator")
  np.testing.assert_array_equal(
      pair.generator.transformer_layers[1]._output_dense.bias.numpy(),
      weights["generator/encoder/layer_1/output/dense/bias"])
  full, _ = make_checkpoint(tmp_path / "full", TINY)
  disc = open_weights(full).load_pair(part="discriminator")
  assert disc.model_config.hidden_size == 32


def expect_error(path, *fragments, part="pair"):
  with pytest.raises(CheckpointError) as info:
    open_weights(str(path)).load_pair(part=part)
  message = str(info.value)
  assert "\n" not in message
  for fragment in fragments:
    assert fragment in message, message


def test_bad_checkpoints_give_clear_errors(tmp_path):
  bert = {k.replace("electra/", "bert/"): v for k, v in numpy_electra.random_weights(
      numpy_electra.original_shapes(**TINY, generator=False)).items()}
  bert["cls/predictions/output_bias"] = np.zeros(97, np.float32)
  expect_error(numpy_electra.write_tf1_checkpoint(bert, str(tmp_path / "bert" / "m")),
               "not an ELECTRA checkpoint: ", "variable(s) outside ELECTRA's scopes",
               "this looks like a BERT checkpoint")

  gen_only, _ = make_checkpoint(tmp_path / "gen", TINY, discriminator=False)
  expect_error(gen_only, "generator only", "part='generator'")

  (tmp_path / "empty").mkdir()
  expect_error(tmp_path / "empty", "holds no checkpoint")
  expect_error(tmp_path / "nowhere" / "model.ckpt", "no such checkpoint")

  weights = numpy_electra.random_weights(numpy_electra.original_shapes(**TINY))
  del weights["electra/encoder/layer_1/output/LayerNorm/beta"]
  partial = numpy_electra.write_tf1_checkpoint(weights, str(tmp_path / "partial" / "m"))
  config = open_weights(partial).model_config()
  with pytest.raises(CheckpointError, match="missing: electra/encoder/layer_1/output/"
                     "LayerNorm/beta"):
    open_weights(partial).load_pair(config)

  full, _ = make_checkpoint(tmp_path / "full", TINY)
  wrong = ModelConfig.from_dict(dict(vocab_size=98, hidden_size=32, num_hidden_layers=2,
                                     embedding_size=24, generator_hidden_size=0.5,
                                     max_position_embeddings=40))
  with pytest.raises(CheckpointError, match=r"word_embeddings has \[97, 24\], "
                     r"expected \[98, 24\]"):
    open_weights(full).load_pair(wrong)


def test_released_zip_layout_with_stale_state_file(tmp_path):
  """A released zip unpacks to a directory whose `checkpoint` file may name paths
  from the machine that wrote it."""
  prefix, _ = make_checkpoint(tmp_path, TINY)
  (tmp_path / "checkpoint").write_text(
      'model_checkpoint_path: "/home/someone/electra_small/model.ckpt-1000000"\n')
  assert open_weights(str(tmp_path)).location == prefix


def test_config_accepts_bert_fields_and_refuses_unknown_ones():
  config = ModelConfig.from_dict({"hidden_size": 768, "hidden_act": "gelu",
                                  "initializer_range": 0.02, "vocab_size": 30522})
  assert (config.num_attention_heads, config.intermediate_size) == (12, 3072)
  with pytest.raises(ValueError, match="did you mean 'hidden_size'"):
    ModelConfig.from_dict({"hiden_size": 768})


def test_layers_are_keras_serializable():
  from model.encoder import ElectraEmbeddings
  from model.electra import GeneratorHead
  config = ModelConfig.from_size("debug", vocab_size=50)
  for layer in (ElectraEmbeddings(config), GeneratorHead(config), DiscriminatorHead(config)):
    clone = type(layer).from_config(layer.get_config())
    assert clone.model_config == config and clone.name == layer.name


def test_mixed_bfloat16_runs_close_to_float32(tmp_path):
  import tf_keras
  prefix, _ = make_checkpoint(tmp_path, TINY)
  inputs = padded_batch(TINY["vocab"])
  want = reference_outputs.compute(prefix, inputs)
  tf_keras.mixed_precision.set_global_policy("mixed_bfloat16")
  try:
    pair = open_weights(prefix).load_pair()
    with tf.GradientTape() as tape:
      got = pair(inputs, training=True)
      loss = tf.reduce_mean(got["generator_logits"]) + tf.reduce_mean(
          got["discriminator_logits"])
    grads = tape.gradient(loss, pair.trainable_variables)
    got = pair(inputs, training=False)
  finally:
    tf_keras.mixed_precision.set_global_policy("float32")
  assert all(v.dtype == tf.float32 for v in pair.trainable_variables)
  assert all(g is not None for g in grads)
  for name in ("discriminator_logits", "generator_logits"):
    assert got[name].dtype == tf.float32
    np.testing.assert_allclose(got[name].numpy(), want[name], atol=0.1, err_msg=name)
