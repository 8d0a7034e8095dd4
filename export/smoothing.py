"""SmoothQuant's outlier migration (Xiao et al. 2022, "SmoothQuant: Accurate and
Efficient Post-Training Quantization for Large Language Models") for the calibrated
LiteRT forms: the few input channels of a dense layer whose activations reach far past
the others' (a real pre-trained encoder's, bench/RESULTS.md) are divided by a per-channel
scale s and the layer's kernel rows multiplied by it, so that per-tensor int8 of the
input no longer spends its range on them. For input channel j of the dense layers reading
one tensor X (the attention's query, key and value share the block's input; the FFN's
intermediate dense reads the attention's LayerNorm):

  s_j = max|X_j| ** alpha / max|W_j| ** (1 - alpha)

max|X_j| over the calibration rows, max|W_j| over row j of every kernel reading X.
The encoder is post-LayerNorm (ELECTRA's, BERT's): a LayerNorm's output is also the
residual sum's other term, so 1/s cannot be folded into its gamma and beta without
changing that sum; the division stays one float32 multiply on each dense layer's input
(export/litert.py keeps it float32, beside the float32 LayerNorm it follows), and the
model computes what it computed before, to rounding. Off unless asked for
(tools.export_lite --smoothing-alpha): on all-MiniLM-L6-v2 it moved no dev metric, the
outliers that cost int8 being the residual sums' (bench/RESULTS.md, "Outlier
migration")."""

import contextlib
from typing import Dict, List, Sequence

import numpy as np
import tensorflow as tf
import tf_keras

from model.internals import block_layers, swap_block_input_dense

# The dense layers of each block reading one tensor, by BlockLayers' names.
GROUPS = (("query", "key", "value"), ("intermediate",))
# The name scope of the input's division, which the int8 forms keep float32.
SCOPE = "smoothing"
_BATCH = 32


def smoothing_scales(input_max: np.ndarray, weight_max: np.ndarray,
                     alpha: float) -> np.ndarray:
  """s_j = input_max_j ** alpha / weight_max_j ** (1 - alpha); 1 where either is 0 (a
  channel that never fires, or that no weight reads, has nothing to migrate)."""
  used = (input_max > 0) & (weight_max > 0)
  scales = np.ones_like(input_max, dtype=np.float64)
  scales[used] = (input_max[used].astype(np.float64) ** alpha
                  / weight_max[used].astype(np.float64) ** (1 - alpha))
  return scales.astype(np.float32)


class _ScaledInput(tf_keras.layers.Layer):
  """A dense layer whose input is first multiplied by a constant per channel."""

  def __init__(self, dense, factors: np.ndarray):
    super().__init__(name=dense.name, dtype=dense.dtype_policy)
    self.dense, self.factors = dense, tf.constant(factors)

  def call(self, inputs):  # pylint: disable=arguments-differ
    with tf.name_scope(SCOPE):
      scaled = inputs * tf.cast(self.factors, inputs.dtype)
      # LiteRT's converter folds a constant multiply into the following dense layer's
      # weights, which would undo the migration; a maximum with float32's lowest value
      # changes nothing and keeps them apart.
      scaled = tf.maximum(scaled, inputs.dtype.min)
    return self.dense(scaled)


class _InputMaxima(tf_keras.layers.Layer):
  """A dense layer that records its input's largest |value| per channel."""

  def __init__(self, dense):
    super().__init__(name=dense.name, dtype=dense.dtype_policy)
    self.dense, self.maxima = dense, None

  def call(self, inputs):  # pylint: disable=arguments-differ
    seen = tf.reduce_max(tf.abs(tf.reshape(inputs, [-1, inputs.shape[-1]])), 0).numpy()
    self.maxima = seen if self.maxima is None else np.maximum(self.maxima, seen)
    return self.dense(inputs)


@contextlib.contextmanager
def _swapped(blocks, make_layer):
  """Each block's GROUPS' dense layers replaced by make_layer(block index, name, dense)
  inside the block; put back on leaving."""
  held = []
  try:
    for index, block in enumerate(blocks):
      for group in GROUPS:
        for name in group:
          dense = getattr(block_layers(block), name)
          swap_block_input_dense(block, name, make_layer(index, name, dense))
          held.append((block, name, dense))
    yield
  finally:
    for block, name, dense in held:
      swap_block_input_dense(block, name, dense)


def input_maxima(model, blocks, calibration: Dict[str, np.ndarray]) -> List[List[np.ndarray]]:
  """For each block, the largest |value| per channel of each GROUPS' input over the
  calibration rows (`model`'s inputs, by name), as the model computes them."""
  recorders = {}

  def recorder(index, name, dense):
    recorders[index, name] = _InputMaxima(dense)
    return recorders[index, name]
  rows = len(next(iter(calibration.values())))
  with _swapped(blocks, recorder):
    for start in range(0, rows, _BATCH):
      model({k: tf.constant(v[start:start + _BATCH]) for k, v in calibration.items()},
            training=False)
  return [[recorders[index, group[0]].maxima for group in GROUPS]
          for index in range(len(blocks))]


def _rows(kernel) -> np.ndarray:
  """A dense kernel as [input channels, outputs]."""
  value = kernel.numpy()
  return value.reshape(value.shape[0], -1)


@contextlib.contextmanager
def migrated(model, blocks: Sequence, calibration: Dict[str, np.ndarray], alpha: float):
  """`model` with its blocks' input outliers migrated into the weights (the kernels of
  GROUPS' dense layers scaled by s per input row, their inputs multiplied by 1 / s);
  as it was on leaving. Calls traced inside compute the migrated model."""
  maxima = input_maxima(model, blocks, calibration)
  saved, factors = [], {}
  for index, block in enumerate(blocks):
    layers = block_layers(block)
    for group, x_max in zip(GROUPS, maxima[index]):
      kernels = [getattr(layers, name).kernel for name in group]
      scales = smoothing_scales(x_max, np.max([np.abs(_rows(k)).max(1) for k in kernels], 0),
                                alpha)
      for name, kernel in zip(group, kernels):
        saved.append((kernel, kernel.numpy()))
        shape = [-1] + [1] * (len(kernel.shape) - 1)
        kernel.assign(kernel.numpy() * scales.reshape(shape))
        factors[index, name] = 1 / scales
  try:
    with _swapped(blocks, lambda index, name, dense: _ScaledInput(dense,
                                                                   factors[index, name])):
      yield
  finally:
    for kernel, value in saved:
      kernel.assign(value)
