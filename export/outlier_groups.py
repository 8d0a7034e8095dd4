"""Per-embedding-group activations (Bondarenko et al. 2021, "Understanding and Overcoming
the Challenges of Efficient Transformer Quantization") for LiteRT's full int8: in each
block, the FFN's output and the residual sum after it are computed as two tensors, the
few channels where a real pre-trained encoder's outliers are and the others, so that
each gets its own per-tensor int8 range instead of one the outliers set for all 384,
which leaves the other channels a step or two of int8 (bench/RESULTS.md, "Outlier
channels in their own int8 tensors").

The channels are each block's `count` largest |x| of that sum over the calibration rows.
The block's output LayerNorm, float32 in every int8 form, reads the two tensors apart
(in the name scope SCOPE, which export/litert.py keeps float32) and joins its two
outputs (a gather placing the outlier channels, a multiply and an add), so every dense
layer and residual sum stays int8. The model computes what it computed before, to
rounding. Applied to full int8 only: mixed int8 keeps those tensors float32.
"""

import contextlib
from typing import Dict, List, Optional

import numpy as np
import tensorflow as tf
import tf_keras

from model.internals import block_layers, plain_post_layer_norm, swap_transformer_layers

# The name scope of the groups' join, which the int8 forms keep float32.
SCOPE = "outlier_groups"
_BATCH = 32


class _GroupedBlock(tf_keras.layers.Layer):
  """`block` (a post-LayerNorm TransformerEncoderBlock, as tf-models computes it at
  inference) from its own sublayers, its FFN output and residual sum split into the
  `outliers` channels and the others. Without `outliers` it computes the block whole and
  records that sum's largest |x| per channel (`maxima`)."""

  def __init__(self, block, outliers: Optional[np.ndarray] = None):
    # The block's name: the ops' names (export/litert.py's patterns) stay the same.
    super().__init__(name=block.name, dtype=block.dtype_policy)
    self.block, self.outliers, self.maxima = block, outliers, None
    if outliers is not None:
      width = block_layers(block).output.kernel.shape[-1]
      chosen = np.isin(np.arange(width), outliers)
      self.others = tf.constant(~chosen, tf.float32)
      # Per channel, its place among the outliers (0 for the others, masked off).
      self.places = tf.constant(np.where(chosen, np.cumsum(chosen) - 1, 0), tf.int32)

  def call(self, inputs, training=None):  # pylint: disable=arguments-differ,unused-argument
    x, mask = inputs
    layers = block_layers(self.block)
    x = layers.attention_norm(x + layers.attention(query=x, value=x, attention_mask=mask))
    inner = layers.intermediate_activation(layers.intermediate(x))
    if self.outliers is None:
      summed = layers.output(inner) + x
      seen = tf.reduce_max(tf.abs(tf.reshape(summed, [-1, summed.shape[-1]])), 0).numpy()
      self.maxima = seen if self.maxima is None else np.maximum(self.maxima, seen)
      return layers.output_norm(summed)
    kernel, bias, norm = layers.output.kernel, layers.output.bias, layers.output_norm
    # The others at full width, the outliers' channels 0 there (their kernel columns and
    # bias fold to 0 at conversion); the outliers narrow.
    with tf.name_scope("output_others"):
      others = (tf.einsum("abc,cd->abd", inner, kernel * self.others)
                + bias * self.others + x * self.others)
    with tf.name_scope("output_outliers"):
      outliers = (tf.einsum("abc,cd->abd", inner, tf.gather(kernel, self.outliers, axis=1))
                  + tf.gather(bias, self.outliers) + tf.gather(x, self.outliers, axis=2))
    # The output LayerNorm (Keras': biased variance, epsilon inside the root) of the two
    # parts as one vector, each normalized apart and joined after. Joined before it,
    # by a concatenation, a gather or an add, both parts were calibrated to the whole
    # sum's one range: the converter gives those ops' inputs their output's.
    with tf.name_scope(SCOPE):
      width = float(kernel.shape[-1])
      mean = (tf.reduce_sum(others, -1, keepdims=True)
              + tf.reduce_sum(outliers, -1, keepdims=True)) / width
      variance = (tf.reduce_sum(tf.square(others - mean) * self.others, -1, keepdims=True)
                  + tf.reduce_sum(tf.square(outliers - mean), -1, keepdims=True)) / width
      scale = tf.math.rsqrt(variance + norm.epsilon)
      normed_others = (others - mean) * scale * (norm.gamma * self.others) + (
          norm.beta * self.others)
      normed_outliers = ((outliers - mean) * scale * tf.gather(norm.gamma, self.outliers)
                         + tf.gather(norm.beta, self.outliers))
      return normed_others + tf.gather(normed_outliers, self.places, axis=2) * (
          1 - self.others)


def outlier_channels(model, calibration: Dict[str, np.ndarray],
                     count: int) -> List[np.ndarray]:
  """For each block of `model`'s encoder, the `count` channels of its FFN residual sum
  with the largest |x| over the calibration rows (`model`'s inputs, by name)."""
  encoder = model.encoder
  recorders = [_GroupedBlock(block) for block in encoder.transformer_layers]
  rows = len(next(iter(calibration.values())))
  with _swapped(encoder, recorders):
    for start in range(0, rows, _BATCH):
      model({k: tf.constant(v[start:start + _BATCH]) for k, v in calibration.items()},
            training=False)
  return [np.sort(np.argsort(-recorder.maxima, kind="stable")[:count])
          for recorder in recorders]


@contextlib.contextmanager
def _swapped(encoder, layers):
  held = swap_transformer_layers(encoder, layers)
  try:
    yield
  finally:
    swap_transformer_layers(encoder, held)


def refusal(model, count: int) -> str:
  """Why `count` outlier channels of `model`'s blocks cannot be kept apart ("" when
  they can)."""
  blocks = model.encoder.transformer_layers
  if not all(plain_post_layer_norm(block) for block in blocks):
    return ("--outlier-channels takes ELECTRA's post-LayerNorm transformer blocks; this "
            "model's blocks are configured otherwise")
  width = block_layers(blocks[0]).output.kernel.shape[-1]
  if count >= width:
    return (f"--outlier-channels {count}: expected fewer than the model's hidden size "
            f"{width}")
  return ""


@contextlib.contextmanager
def grouped(model, calibration: Dict[str, np.ndarray], count: int):
  """`model` with each block's FFN output and residual sum in two tensors, its `count`
  outlier channels (outlier_channels) and the others; as it was on leaving. Calls traced
  inside compute the grouped model."""
  chosen = outlier_channels(model, calibration, count)
  with _swapped(model.encoder, [_GroupedBlock(block, channels) for block, channels
                                in zip(model.encoder.transformer_layers, chosen)]):
    yield chosen
