"""Dropout: the keyed masks the encoder's dropout layers drop with, and the random
generators the dropout layers draw from, which checkpoints hold and recompute rewinds.

Keras' Dropout draws a uniform float per unit with TensorFlow's Philox, whose CPU
kernel is scalar (bench/RESULTS.md, "Keyed dropout"). KeyedDropout draws two 32-bit
words a call from the same checkpointed generator and keeps unit i where a 32-bit
integer hash of i and the key reaches rate * 2^32, a few integer operations that XLA
vectorizes and fuses with the select. Same rate, scale and placement as Keras' and the
original's dropout, other random bits. The masks are integer arithmetic, so the fused
islands (model/fused.py), which compute them inside their own XLA code, and this layer
drop the same units.
"""

import tensorflow as tf
import tf_keras

from model.internals import draw_key, draws_from_generator, dropout_generator, smart_cond

# lowbias32 (Chris Wellons' hash-prospector): xor-shift 16, multiply, xor-shift 15,
# multiply, xor-shift 16; a full-avalanche 32-bit hash with 32-bit operations only.
_HASH_MULTIPLIERS = (0x7FEB352D, 0x846CA68B)


def _hash32(h):
  for shift, multiplier in zip((16, 15), _HASH_MULTIPLIERS):
    h = tf.bitwise.bitwise_xor(h, tf.bitwise.right_shift(h, shift)) * tf.constant(
        multiplier, tf.uint32)
  return tf.bitwise.bitwise_xor(h, tf.bitwise.right_shift(h, 16))


def kept_units(key, shape, rate: float, layout=None):
  """Which units of a tensor of `shape` dropout at `rate` keeps under `key` (two
  uint32): unit i, counted flat, where hash(hash(i xor key[0]) xor key[1]) >=
  rate * 2^32. `layout` (a shape at least `shape` on every axis; default `shape`) is
  the tensor the units are counted in: a batch cut short of its padded length counts
  each unit where the padded batch has it, so both drop the same units."""
  if layout is None:
    position = tf.reshape(tf.range(tf.reduce_prod(shape), dtype=tf.int32), shape)
  else:
    strides = tf.math.cumprod(layout, exclusive=True, reverse=True)
    rank = shape.shape[0]
    position = sum(tf.reshape(tf.range(shape[axis]) * strides[axis],
                              [-1 if a == axis else 1 for a in range(rank)])
                   for axis in range(rank))
  position = tf.bitcast(position, tf.uint32)
  first = _hash32(tf.bitwise.bitwise_xor(position, key[0]))
  hashed = _hash32(tf.bitwise.bitwise_xor(first, key[1]))
  # Kept from here on: P(hash < it) = rate, to 2^-32.
  threshold = min(round(rate * 2.0 ** 32), 2 ** 32 - 1)
  return hashed >= tf.constant(threshold, tf.uint32)


def apply_dropout(x, keep, rate: float):
  """x / (1 - rate) where kept, else 0 (tf.nn.dropout's arithmetic); also its gradient.
  keep None: no dropout."""
  if keep is None:
    return x
  return tf.where(keep, x * tf.constant(1 / (1 - rate), x.dtype), tf.zeros((), x.dtype))


@tf.function(jit_compile=True, autograph=False)
def _keyed_dropout(x, key, rate, layout):
  return apply_dropout(x, kept_units(key, tf.shape(x), rate, layout), rate)


def dropout_key(dropout: tf_keras.layers.Dropout):
  """The key `dropout` (a KeyedDropout) drops its next call's units with, drawn now
  from its random generator; None at rate 0."""
  if not dropout.rate:
    return None
  return tf.bitcast(draw_key(dropout), tf.uint32)


class KeyedDropout(tf_keras.layers.Dropout):
  """Keras' Dropout (same rate, scale, random generator and checkpoint entries) whose
  mask is kept_units under a key drawn from that generator: see the module's words.
  `sequence_axes`: the input's token axes, counted at `padded_length` when one is set
  (use_padded_length), so that a batch cut to its longest example drops the units the
  batch padded to that length drops."""

  padded_length = None

  def __init__(self, rate, noise_shape=None, sequence_axes=(1,), **kwargs):
    if noise_shape is not None:
      raise ValueError("KeyedDropout draws one mask unit per input unit: noise_shape "
                       f"must be None, got {noise_shape}")
    super().__init__(rate, **kwargs)
    self.sequence_axes = tuple(sequence_axes)

  def layout(self, shape):
    """kept_units' layout for an input of `shape`: None (the input itself) unless a
    padded length is set."""
    if not self.padded_length:
      return None
    return tf.tensor_scatter_nd_update(
        shape, [[axis] for axis in self.sequence_axes],
        tf.fill([len(self.sequence_axes)], tf.constant(self.padded_length, shape.dtype)))

  def call(self, inputs, training=None):
    if not self.rate:
      return tf.identity(inputs)
    if training is None:
      training = tf_keras.backend.learning_phase()
    return smart_cond(
        training, lambda: _keyed_dropout(inputs, dropout_key(self), self.rate,
                                         self.layout(tf.shape(inputs))),
        lambda: tf.identity(inputs))

  def get_config(self):
    return {**super().get_config(), "sequence_axes": self.sequence_axes}


def use_padded_length(model: tf_keras.layers.Layer, length):
  """Counts the dropout units of every KeyedDropout inside `model` at token length
  `length` (None: at the input's own), whatever length a batch is cut to."""
  for module in [model, *model.submodules]:
    if isinstance(module, KeyedDropout):
      module.padded_length = length


def dropout_generators(layer: tf_keras.layers.Layer, strict: bool = False) -> list:
  """The tf.random.Generators of the dropout layers inside `layer`, created now (Keras
  makes them at the first training call). `strict`: a dropout layer drawing from Keras'
  legacy stateful ops (no generator to save or rewind) is an error."""
  generators = []
  for module in layer.submodules:
    if not draws_from_generator(module):
      continue
    generator = dropout_generator(module)
    if generator is not None:
      generators.append(generator)
    elif strict and getattr(module, "rate", 0):
      raise ValueError(
          f"dropout layer {module.name} draws from Keras' legacy stateful ops, whose "
          "masks cannot be drawn again; call training.runtime.use_checkpointed_dropout "
          "before building the model")
  return generators
