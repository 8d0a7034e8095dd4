"""init_scheme "mimetic": attention is local from step 0 on real text, the attention
weights are what NumPy computes from the kernels, and a mimetic start keeps the
original's checkpoint names and shapes (original format and transformers round trips)."""

import json

import numpy as np
import pytest
import tensorflow as tf
import torch
import transformers

from data_prep import masking
from data_prep.tokenizer import Tokenizer
from data_prep.vocab import load_vocab
from runs.pretrained import open_weights
from model.config import ModelConfig
from model.electra import ElectraPair
from model.initialization import apply_init_scheme, prior_discriminator_head, sinusoids
from tests.helpers import shared_path, save_original
from tools import export_hf

SEQ = 128


@pytest.fixture(scope="module")
def vocab():
  return load_vocab(shared_path("vocab", "bert_uncased_vocab.txt"))


@pytest.fixture(scope="module")
def masked_text(vocab):
  """8 x 128 tokens of the shared corpus, masked as pre-training masks them."""
  with open(shared_path("corpus", "english_corpus.txt"), encoding="utf-8") as f:
    lines = [line.strip() for line, _ in zip(f, range(2000)) if len(line) > 100]
  ids, _ = Tokenizer(vocab).batch_ids(lines)
  body = ids[:8 * (SEQ - 2)].reshape(8, SEQ - 2)
  ids = np.concatenate([np.full([8, 1], vocab.cls_id), body,
                        np.full([8, 1], vocab.sep_id)], 1).astype(np.int32)
  ones = np.ones_like(ids)
  masked = masking.mask_inputs(ids, ones, mask_prob=0.15, max_predictions=19,
                               mask_id=vocab.mask_id,
                               special_ids=(vocab.cls_id, vocab.sep_id, vocab.mask_id),
                               seed=tf.constant([3, 4]))
  return {"input_ids": masked.input_ids, "input_mask": tf.constant(ones),
          "segment_ids": tf.zeros_like(ones)}


def tiny_pair(vocab, scheme):
  config = ModelConfig.from_size("tiny", vocab_size=len(vocab), generator_hidden_size=0.5)
  pair = ElectraPair(config).build_variables()
  apply_init_scheme(pair, scheme, seed=0, initializer_range=config.initializer_range)
  return pair


def neighbour_share(probs, masked_ids, mask_id):
  """Mean attention weight that [MASK] queries put on the tokens 1-3 positions away."""
  offset = np.abs(np.arange(SEQ)[:, None] - np.arange(SEQ)[None])
  weight = (probs.mean(1) * ((offset >= 1) & (offset <= 3))).sum(-1)  # [B, S]
  return weight[masked_ids == mask_id].mean()


def test_mimetic_attention_is_local_at_step_0(vocab, masked_text):
  ids = masked_text["input_ids"].numpy()
  shares = {}
  for scheme in ("truncated_normal", "mimetic"):
    pair = tiny_pair(vocab, scheme)
    for part in ("generator", "discriminator"):
      first = getattr(pair, part).inspect(masked_text)[1][0].numpy()
      shares[scheme, part] = neighbour_share(first, ids, vocab.mask_id)
  # Uniform attention puts 6/128 = 0.047 on the six neighbours.
  for part in ("generator", "discriminator"):
    assert shares["truncated_normal", part] < 0.06, shares
    assert shares["mimetic", part] > 0.3, shares


def test_attention_probs_match_numpy(vocab, masked_text):
  """The first layer's weights, from the kernels: softmax(q k^T / sqrt(d) + mask)."""
  pair = tiny_pair(vocab, "mimetic")
  encoder = pair.discriminator
  inputs = {k: v[:2] for k, v in masked_text.items()}
  x, _ = encoder._embed(inputs)  # pylint: disable=protected-access
  x = x.numpy()
  attention = encoder.transformer_layers[0]._attention_layer  # pylint: disable=protected-access
  q = np.einsum("bsd,dhk->bhsk", x, attention._query_dense.kernel.numpy()) + (  # pylint: disable=protected-access
      attention._query_dense.bias.numpy()[None, :, None])  # pylint: disable=protected-access
  k = np.einsum("bsd,dhk->bhsk", x, attention._key_dense.kernel.numpy()) + (  # pylint: disable=protected-access
      attention._key_dense.bias.numpy()[None, :, None])  # pylint: disable=protected-access
  logits = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1])
  expected = np.exp(logits - logits.max(-1, keepdims=True))
  expected /= expected.sum(-1, keepdims=True)
  np.testing.assert_allclose(encoder.inspect(inputs)[1][0].numpy(), expected,
                             atol=1e-5)


def test_mimetic_kernels_and_positions():
  """query x key^T of each head is the rank-64 part of 0.2 Z + 0.7 I (near 0.7 on the
  diagonal); value x output near -0.7 I; positions are the sinusoid table."""
  config = ModelConfig.from_size("tiny", vocab_size=200)
  pair = ElectraPair(config).build_variables()
  apply_init_scheme(pair, "mimetic", seed=1, initializer_range=0.02)
  attention = pair.discriminator.transformer_layers[2]._attention_layer  # pylint: disable=protected-access
  query = attention._query_dense.kernel.numpy()  # pylint: disable=protected-access
  key = attention._key_dense.kernel.numpy()  # pylint: disable=protected-access
  value = attention._value_dense.kernel.numpy()  # pylint: disable=protected-access
  output = attention._output_dense.kernel.numpy()  # pylint: disable=protected-access
  qk = query[:, 0] @ key[:, 0].T
  vo = sum(value[:, h] @ output[h] for h in range(2))
  assert 0.3 < np.diag(qk).mean() < 0.7 and abs(qk[~np.eye(128, dtype=bool)].mean()) < 0.01
  assert np.diag(vo).mean() < -0.5
  table = pair.discriminator.embeddings.position_table.numpy()
  np.testing.assert_allclose(table, sinusoids(512, 128, 4.0 * 0.02), atol=1e-7)
  assert np.sqrt(np.mean(table ** 2)) == pytest.approx(0.08, rel=1e-3)


@pytest.mark.parametrize("prior_head", [False, True])
def test_mimetic_start_round_trips(tmp_path, vocab, masked_text, prior_head):
  """Saved in the original format, loaded back, and exported to transformers: the
  same outputs (the start, and the discriminator head's prior start, change values
  only, never names or shapes)."""
  pair = tiny_pair(vocab, "mimetic")
  if prior_head:
    prior_discriminator_head(pair.discriminator_head, 0.15)
    np.testing.assert_allclose(pair.discriminator_logits(masked_text).numpy(),
                               np.log(0.15 / 0.85), rtol=1e-6)
  folder = tmp_path / "export"
  save_original(pair, str(folder / "model.ckpt-0"))
  (folder / "config.json").write_text(json.dumps(pair.model_config.to_dict()))
  (folder / "vocab.txt").write_text("".join(t + "\n" for t in vocab.tokens))
  loaded = open_weights(str(folder)).load_pair()
  ours = pair.discriminator_logits(masked_text).numpy()
  np.testing.assert_allclose(loaded.discriminator_logits(masked_text).numpy(), ours,
                             atol=1e-6)
  np.testing.assert_allclose(loaded.generator_logits(masked_text).numpy(),
                             pair.generator_logits(masked_text).numpy(), atol=1e-5)

  assert export_hf.main(["--checkpoint", str(folder), "--output",
                         str(tmp_path / "hf")]) == 0
  model, info = transformers.ElectraForPreTraining.from_pretrained(
      str(tmp_path / "hf"), output_loading_info=True)
  assert not any(info.values()), info
  with torch.no_grad():
    theirs = model.eval()(
        input_ids=torch.tensor(masked_text["input_ids"].numpy(), dtype=torch.long),
        attention_mask=torch.tensor(masked_text["input_mask"].numpy(), dtype=torch.long),
        token_type_ids=torch.tensor(masked_text["segment_ids"].numpy(),
                                    dtype=torch.long)).logits.numpy()
  np.testing.assert_allclose(theirs, ours, atol=1e-4)
