"""model/dropout.py's KeyedDropout: the units it keeps are the hash a NumPy
reimplementation computes, at the rate asked, independent between units and calls,
drawn again from the same generator state; and the transformer layers drop with it."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from model import dropout as dropout_lib
from model.internals import block_layers, dropout_generator
from training.runtime import use_checkpointed_dropout
from tests.helpers import one_layer


def numpy_kept(key: np.ndarray, size: int, rate: float) -> np.ndarray:
  """lowbias32 twice over each unit's flat position, as the module's words say, in
  NumPy's wrapping uint32 arithmetic."""
  def hash32(h):
    for shift, multiplier in ((16, 0x7FEB352D), (15, 0x846CA68B)):
      h = (h ^ (h >> np.uint32(shift))) * np.uint32(multiplier)
    return h ^ (h >> np.uint32(16))
  key = key.view(np.uint32)
  hashed = hash32(hash32(np.arange(size, dtype=np.uint32) ^ key[0]) ^ key[1])
  return hashed >= np.uint32(round(rate * 2 ** 32))


def keyed_layer(rate, seed=3):
  use_checkpointed_dropout(seed)
  layer = dropout_lib.KeyedDropout(rate)
  layer.build([None])
  return layer


def test_kept_units_are_the_hash_numpy_computes():
  key = np.array([-123456789, 987654321], np.int32)
  kept = dropout_lib.kept_units(tf.bitcast(tf.constant(key), tf.uint32), [4, 5, 6], 0.3)
  np.testing.assert_array_equal(kept.numpy().reshape(-1), numpy_kept(key, 120, 0.3))


@pytest.mark.parametrize("rate", [0.1, 0.5])
def test_the_layer_drops_at_its_rate_scales_the_rest_and_redraws_from_its_state(rate):
  layer = keyed_layer(rate)
  x = tf.random.stateless_uniform([64, 128, 32], [1, 2], minval=1.0, maxval=2.0)
  generator = dropout_generator(layer)
  before = generator.state.numpy()
  first, second = (layer(x, training=True).numpy() for _ in range(2))
  kept = first != 0
  n = kept.size
  # The kept fraction within 5 binomial standard deviations of 1 - rate.
  assert abs(kept.mean() - (1 - rate)) < 5 * np.sqrt(rate * (1 - rate) / n)
  np.testing.assert_allclose(first[kept], x.numpy()[kept] / (1 - rate), rtol=1e-6)
  # Two calls draw two keys: their masks agree only by chance (rate^2 + (1-rate)^2).
  agree = ((second != 0) == kept).mean()
  assert abs(agree - (rate ** 2 + (1 - rate) ** 2)) < 0.01
  # Neighbouring units (the hash's consecutive inputs) are uncorrelated.
  flat = kept.reshape(-1).astype(np.float64)
  assert abs(np.corrcoef(flat[:-1], flat[1:])[0, 1]) < 0.01
  # The key comes from the checkpointed generator: its state back, the same mask.
  generator.state.assign(before)
  np.testing.assert_array_equal(layer(x, training=True).numpy(), first)
  # What NumPy's hash keeps under the key the generator gives from that state.
  generator.state.assign(before)
  key = dropout_lib.dropout_key(layer).numpy()
  np.testing.assert_array_equal(kept.reshape(-1), numpy_kept(key, n, rate))
  # Inference and rate 0 pass the input through.
  np.testing.assert_array_equal(layer(x, training=False).numpy(), x.numpy())
  np.testing.assert_array_equal(keyed_layer(0.0)(x, training=True).numpy(), x.numpy())


def test_the_gradient_is_the_mask_times_the_scale():
  layer = keyed_layer(0.4)
  x = tf.random.stateless_normal([8, 50], [5, 6])
  with tf.GradientTape() as tape:
    tape.watch(x)
    y = layer(x, training=True)
  gradient = tape.gradient(y, x).numpy()
  np.testing.assert_allclose(gradient, (y.numpy() != 0) / 0.6, rtol=1e-6)


def test_under_mixed_bfloat16_the_mask_is_the_float32_one():
  x = tf.random.stateless_uniform([16, 64], [7, 8], minval=1.0, maxval=2.0)
  kept = keyed_layer(0.2, seed=9)(x, training=True).numpy() != 0
  # The conftest sets float32 back after the test.
  tf_keras.mixed_precision.set_global_policy("mixed_bfloat16")
  y = keyed_layer(0.2, seed=9)(x, training=True)
  assert y.dtype == tf.bfloat16
  np.testing.assert_array_equal(y.numpy() != 0, kept)


def test_noise_shape_is_refused_in_one_line():
  with pytest.raises(ValueError, match="noise_shape must be None"):
    dropout_lib.KeyedDropout(0.1, noise_shape=[None, 1])


def test_the_transformer_layer_drops_with_three_keyed_layers_and_no_other():
  layer, x = one_layer(0.1, seed=4)
  layer([x, tf.ones([2, 6, 6])], training=True)
  layers = block_layers(layer)
  keyed = [layers.probs_dropout, layers.attention_dropout, layers.output_dropout]
  assert all(type(d) is dropout_lib.KeyedDropout and d.rate == 0.1 for d in keyed)
  # The layers they replaced are gone from the block (no generator of theirs lands in
  # checkpoints or in recompute's rewinds); tf-models' inner dropout, at rate 0, stays.
  dropouts = [m for m in layer.submodules if isinstance(m, tf_keras.layers.Dropout)]
  assert sorted(id(d) for d in dropouts if d.rate) == sorted(map(id, keyed))
  assert len(dropouts) == 4
