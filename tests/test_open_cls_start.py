"""init_scheme "mimetic_open_cls": [CLS] embeds to zero, so its first layer's attention
is uniform over the real tokens while the other tokens keep the mimetic start, in both
networks and every objective; values only (original format and transformers round
trips); refused where it cannot apply."""

import json

import numpy as np
import pytest
import tensorflow as tf
import tf_keras
import torch
import transformers

from data_prep.vocab import VocabError
from model.config import ModelConfig
from model.electra import ElectraPair
from model.encoder import ElectraEmbeddings
from model.initialization import apply_init_scheme, encoders_of, open_cls_row
from runs.pretrained import open_weights
from model.weights.original import original_variables
from pretrain.config import load_config
from pretrain.model import PretrainingModel, SpecialTokens
from tests.helpers import save_original
from tools import export_hf

SPECIAL = SpecialTokens(cls_id=2, sep_id=3, mask_id=4)
TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(59)]
# Two sentences of 6 and 4 real tokens, then padding.
BATCH = {"input_ids": tf.constant([[2, 10, 11, 12, 13, 3, 0, 0],
                                   [2, 20, 21, 3, 0, 0, 0, 0]]),
         "input_mask": tf.constant([[1, 1, 1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 0, 0, 0, 0]]),
         "segment_ids": tf.zeros([2, 8], tf.int32)}
MASK = BATCH["input_mask"].numpy().astype(bool)
UNIFORM = MASK / MASK.sum(1, keepdims=True)  # [B, S]: uniform over the real tokens


def debug_pair(scheme, **overrides):
  """A pair smaller than the debug preset (2 layers of 4 heads, with an embedding
  projection), the same random values for every scheme before the scheme sets its
  own."""
  config = ModelConfig.from_size("debug", vocab_size=len(TOKENS), embedding_size=32,
                                 hidden_size=64, num_hidden_layers=2,
                                 intermediate_size=128, max_position_embeddings=32,
                                 generator_hidden_size=0.5, **overrides)
  tf_keras.utils.set_random_seed(0)
  pair = ElectraPair(config).build_variables()
  apply_init_scheme(pair, scheme, seed=0, initializer_range=config.initializer_range,
                    cls_id=SPECIAL.cls_id)
  return pair


def names_and_shapes(pair):
  return [(name, tuple(v.shape)) for name, v, _ in original_variables(pair)]


def assert_cls_uniform(probs):
  """[CLS]'s row (position 0) of [B, heads, S, S] weights is uniform over real tokens."""
  np.testing.assert_allclose(probs[:, :, 0], np.broadcast_to(UNIFORM[:, None],
                                                             probs[:, :, 0].shape),
                             atol=1e-6)


@pytest.mark.parametrize("untied_embeddings", [False, True])
def test_cls_reads_the_sentence_and_the_others_keep_the_mimetic_pattern(
    untied_embeddings):
  opened = debug_pair("mimetic_open_cls", untied_generator_embeddings=untied_embeddings)
  mimetic = debug_pair("mimetic", untied_generator_embeddings=untied_embeddings)
  for part in ("discriminator", "generator"):
    probs = getattr(opened, part).inspect(BATCH)[1][0].numpy()
    reference = getattr(mimetic, part).inspect(BATCH)[1][0].numpy()
    assert_cls_uniform(probs)
    # Every other real token's row, over the tokens after [CLS] (whose key is now zero),
    # is the mimetic start's, and far from uniform.
    rows = MASK.copy()
    rows[:, 0] = False
    ours = probs.transpose(0, 2, 1, 3)[rows][..., 1:]  # [tokens, heads, S - 1]
    theirs = reference.transpose(0, 2, 1, 3)[rows][..., 1:]
    np.testing.assert_allclose(ours / ours.sum(-1, keepdims=True),
                               theirs / theirs.sum(-1, keepdims=True), atol=1e-5)
    peaks = probs.transpose(0, 2, 1, 3)[rows].max(-1) * MASK.sum(1)[np.nonzero(rows)[0],
                                                                    None]
    assert peaks.min() > 1.15 and peaks.mean() > 1.5  # peak over uniform's weight


@pytest.mark.parametrize("untied_embeddings", [False, True])
def test_the_cls_row_cancels_position_0_and_segment_0(untied_embeddings):
  opened = debug_pair("mimetic_open_cls", untied_generator_embeddings=untied_embeddings)
  mimetic = debug_pair("mimetic", untied_generator_embeddings=untied_embeddings)
  assert (opened.generator.embeddings is opened.discriminator.embeddings) != (
      untied_embeddings)
  for part in ("discriminator", "generator"):
    encoder, reference = getattr(opened, part), getattr(mimetic, part)
    tables = [(e.embedding_table.numpy(), e.position_table.numpy(),
               e.token_type_embeddings.embeddings.numpy())
              for e in (encoder.embeddings, reference.embeddings)]
    (words, positions, types), (words_0, positions_0, types_0) = tables
    np.testing.assert_array_equal(words[SPECIAL.cls_id], -(positions[0] + types[0]))
    # The two rows it cancels moved by rounding only (2^-23 of their elements' sizes);
    # nothing else moved.
    size = np.abs(positions_0[0]) + np.abs(types_0[0])
    assert (np.abs(positions[0] - positions_0[0]) <= size * 2 ** -23).all()
    assert (np.abs(types[0] - types_0[0]) <= size * 2 ** -23).all()
    others = np.arange(len(words)) != SPECIAL.cls_id
    np.testing.assert_array_equal(words[others], words_0[others])
    np.testing.assert_array_equal(positions[1:], positions_0[1:])
    np.testing.assert_array_equal(types[1:], types_0[1:])
    # [CLS] enters the first layer as exactly zero (after LayerNorm and projection).
    first_input, _ = encoder._embed(BATCH)  # pylint: disable=protected-access
    np.testing.assert_array_equal(first_input.numpy()[:, 0], 0)
    assert np.abs(first_input.numpy()[:, 1:]).max() > 0.1


def test_cls_embeds_to_zero_in_bfloat16():
  """Under mixed precision the sum runs in bfloat16: still exactly zero."""
  config = ModelConfig.from_size("debug", vocab_size=len(TOKENS), embedding_size=64,
                                 max_position_embeddings=32)
  tf_keras.mixed_precision.set_global_policy("mixed_bfloat16")
  try:
    embeddings = ElectraEmbeddings(config)
    embeddings(BATCH["input_ids"], BATCH["segment_ids"])
    rng = np.random.default_rng(0)
    for table in (embeddings.position_table,
                  embeddings.token_type_embeddings.embeddings):
      table.assign(rng.normal(0, 0.1, table.shape).astype(np.float32))
    open_cls_row(embeddings, SPECIAL.cls_id)
    out = embeddings(BATCH["input_ids"], BATCH["segment_ids"]).numpy()
  finally:
    tf_keras.mixed_precision.set_global_policy("float32")
  np.testing.assert_array_equal(out[:, 0], 0)
  assert np.abs(out[:, 1:]).max() > 0.1


def tiny_run(**overrides):
  values = {"debug": True, "vocab_size": len(TOKENS), "max_seq_length": 8,
            "embedding_size": 24, "generator_hidden_size": 0.5,
            "init_scheme": "mimetic_open_cls",
            "model_hparam_overrides": {"hidden_size": 32, "num_hidden_layers": 2,
                                       "num_attention_heads": 2,
                                       "intermediate_size": 64,
                                       "max_position_embeddings": 16}}
  return load_config("electra_small", "unused_data_dir", {**values, **overrides})


@pytest.mark.parametrize("objective", ["electra", "masked_lm", "electric"])
def test_every_objective_gets_the_same_start(objective):
  """As the trainer starts a fresh run: every encoder's [CLS] reads the whole sentence
  in its first layer (Electric's left-to-right tower reads only [CLS] at position 0)."""
  config = tiny_run(objective=objective)
  model = PretrainingModel(config, SPECIAL).build_variables(8)
  apply_init_scheme(model, config.init_scheme, config.seed,
                    model.model_config.initializer_range, cls_id=SPECIAL.cls_id)
  built = encoders_of(model)
  assert len(built) == {"electra": 2, "masked_lm": 1, "electric": 3}[objective]
  for encoder in built:
    first_input, _ = encoder._embed(BATCH)  # pylint: disable=protected-access
    np.testing.assert_array_equal(first_input.numpy()[:, 0], 0)
    if encoder.attention_direction != "ltr":
      assert_cls_uniform(encoder.inspect(BATCH)[1][0].numpy())


def test_refused_where_it_cannot_apply(tmp_path):
  """A vocabulary without [CLS] is refused in one line at config time; a caller that
  does not say which id is [CLS] is refused too."""
  (tmp_path / "vocab.txt").write_text("".join(t + "\n" for t in TOKENS if t != "[CLS]"))
  with pytest.raises(VocabError, match=r"missing \[CLS\]") as refused:
    load_config("run", str(tmp_path), {"model_size": "tiny",
                                       "init_scheme": "mimetic_open_cls"})
  assert "\n" not in str(refused.value)
  pair = ElectraPair(ModelConfig.from_size("debug", vocab_size=64)).build_variables()
  with pytest.raises(ValueError, match="mimetic_open_cls needs the id of"):
    apply_init_scheme(pair, "mimetic_open_cls", seed=0, initializer_range=0.02)


def test_values_only_round_trips(tmp_path):
  """The original's checkpoint names and shapes; saved in the original format, loaded
  back, and exported to transformers: the same outputs, and transformers' [CLS]
  attends uniformly in its first layer too."""
  pair = debug_pair("mimetic_open_cls")
  assert names_and_shapes(pair) == names_and_shapes(debug_pair("truncated_normal"))
  folder = tmp_path / "export"
  save_original(pair, str(folder / "model.ckpt-0"))
  (folder / "config.json").write_text(json.dumps(pair.model_config.to_dict()))
  (folder / "vocab.txt").write_text("".join(t + "\n" for t in TOKENS))
  loaded = open_weights(str(folder)).load_pair()
  ours = pair.discriminator_logits(BATCH).numpy()
  np.testing.assert_allclose(loaded.discriminator_logits(BATCH).numpy(), ours, atol=1e-6)
  np.testing.assert_allclose(loaded.generator_logits(BATCH).numpy(),
                             pair.generator_logits(BATCH).numpy(), atol=1e-5)

  assert export_hf.main(["--checkpoint", str(folder), "--output",
                         str(tmp_path / "hf")]) == 0
  model, info = transformers.ElectraForPreTraining.from_pretrained(
      str(tmp_path / "hf"), output_loading_info=True, attn_implementation="eager")
  assert not any(info.values()), info
  with torch.no_grad():
    out = model.eval()(
        input_ids=torch.tensor(BATCH["input_ids"].numpy(), dtype=torch.long),
        attention_mask=torch.tensor(BATCH["input_mask"].numpy(), dtype=torch.long),
        token_type_ids=torch.tensor(BATCH["segment_ids"].numpy(), dtype=torch.long),
        output_attentions=True)
  np.testing.assert_allclose(out.logits.numpy()[MASK], ours[MASK], atol=1e-4)
  assert_cls_uniform(out.attentions[0].numpy())
