"""The transformer layer's elementwise work fused into small XLA islands.

TensorFlow runs every elementwise op of tf-models-official's TransformerEncoderBlock
(bias adds, GELU, LayerNorm's moments, dropout's compare and select, residual adds,
the attention's mask and softmax) as its own kernel with its own pass over memory; on a
CPU that costs about as much as the layer's matrix products. Compiling the whole step
with XLA fuses them but loses more in XLA's CPU matrix products than it gains. Here the
matrix products stay TensorFlow's (oneDNN) ops and only the chains between them are
compiled, each a `tf.function(jit_compile=True)` with its own gradient, also compiled,
that keeps what the unfused gradient keeps (or less); the biases' and LayerNorms'
parameter gradients, sums over the batch's rows, are TensorFlow's BiasAddGrad on the
islands' outputs (_bias_gradient):

  q, k, v bias adds, the query's 1/sqrt(size) and the heads' transpose   (one island)
  mask + softmax + attention dropout                                     (one island)
  bias + dropout + residual + LayerNorm, after the attention and the FFN (one island)
  bias + GELU                                                            (one island)

The block's three dropout layers are model/dropout.py's KeyedDropout: each call draws a
key from the layer's checkpointed generator, and the islands compute the mask from it in
their own code (an integer hash, fused with the select), as the layer itself does, so
the fused layer drops exactly the units the unfused one drops; only float rounding
differs (XLA's erfc, softmax and LayerNorm arithmetic), within float32 tolerance
(tests/test_fused.py).

Under mixed_bfloat16 the islands compute in the unfused layer's dtypes: products, bias
adds, mask, softmax, dropout's select and the attention's residual sum in
bfloat16; the GELU (tf-models makes its activation float32 under that policy), the
feed-forward's residual sum and both LayerNorms (float32 layers) in float32; the
layer's output float32. Inside an island XLA may keep float32 between two bfloat16 ops
where TensorFlow rounds each op's output, so the two differ within bfloat16 rounding.

What was tried and left out, each slower: bench/RESULTS.md, "Figures moved from code
comments".
"""

import tensorflow as tf
import tf_keras
from official.nlp.modeling import layers as tfm_layers

from model.dropout import KeyedDropout, apply_dropout, dropout_key, kept_units
from model.internals import (attention_scale, block_layers, plain_post_layer_norm,
                             replace_block_dropouts)

SQRT_HALF = 0.7071067811865476
INV_SQRT_2PI = 0.3989422804014327
# What tf_keras' masked softmax adds to masked-off float32 and bfloat16 scores
# (layers/activation/softmax.py _large_compatible_negative).
MASK_ADDER = -1e9


def gelu_value(x):
  """The exact erf GELU, the ops of tf.nn.gelu(approximate=False)."""
  return 0.5 * x * tf.math.erfc(-x * tf.cast(SQRT_HALF, x.dtype))


def gelu_derivative(x):
  """d/dx [x Phi(x)] = Phi(x) + x phi(x)."""
  cdf = 0.5 * tf.math.erfc(-x * tf.cast(SQRT_HALF, x.dtype))
  pdf = tf.exp(-0.5 * tf.square(x)) * tf.cast(INV_SQRT_2PI, x.dtype)
  return cdf + x * pdf


def _compiled(fn):
  return tf.function(fn, jit_compile=True, autograph=False)


def _bias_gradient(x, trailing: int = 1):
  """Sum over every axis but the `trailing` last ones: a bias's gradient, as TensorFlow's
  BiasAddGrad kernel, outside the islands. Inside them XLA's CPU code was slower at
  every length a fine-tuning batch is cut to: its reductions over leading axes read
  memory column by column, and its product with a row of ones (the form before) cost up
  to 3x the GELU's whole gradient at 40-56 tokens (bench/RESULTS.md, "The step's
  per-step costs, cut"). Summed in float32 (as XLA's product summed bfloat16), in
  x's dtype after."""
  kept = x.shape[-trailing:]
  rows = tf.cast(tf.reshape(x, [-1, kept.num_elements()]), tf.float32)
  return tf.cast(tf.reshape(tf.raw_ops.BiasAddGrad(out_backprop=rows), kept), x.dtype)


# ---- the islands: forward and backward, each compiled -----------------------------

@_compiled
def _qkv_forward(query, key, value, query_bias, key_bias, value_bias, query_scale):
  """[B, T, N, W] projections -> biased, query scaled, as [B, N, T, W]."""
  heads_first = lambda x: tf.transpose(x, [0, 2, 1, 3])
  return (heads_first((query + query_bias) * query_scale), heads_first(key + key_bias),
          heads_first(value + value_bias))


@_compiled
def _qkv_backward(d_query, d_key, d_value, query_scale):
  seq_first = lambda x: tf.transpose(x, [0, 2, 1, 3])
  return seq_first(d_query) * query_scale, seq_first(d_key), seq_first(d_value)


def _kept(x, key, rate, layout):
  return None if key is None else kept_units(key, tf.shape(x), rate, layout)


@_compiled
def _dropout_forward(x, key, rate, layout):
  """-> dropped-out x, kept units."""
  keep = _kept(x, key, rate, layout)
  return apply_dropout(x, keep, rate), keep


@_compiled
def _softmax_backward(d_dropped, probs, keep, rate):
  d_probs = apply_dropout(d_dropped, keep, rate)
  return probs * (d_probs - tf.reduce_sum(d_probs * probs, -1, keepdims=True))


@_compiled
def _residual_norm_forward(x, bias, key, layout, residual, gamma, beta, rate, epsilon):
  """LayerNorm(residual + dropout(x + bias)) -> output, normalized input, 1/std,
  kept units. In the dtypes of the unfused layer: the dropped-out branch is added in
  the residual's dtype, and the LayerNorm computes in its variables' (float32)."""
  keep = _kept(x, key, rate, layout)
  dropped = tf.cast(apply_dropout(x + bias, keep, rate), residual.dtype)
  summed = tf.cast(dropped + residual, gamma.dtype)
  centered = summed - tf.reduce_mean(summed, -1, keepdims=True)
  inv_std = tf.math.rsqrt(tf.reduce_mean(tf.square(centered), -1, keepdims=True)
                          + epsilon)
  normed = centered * inv_std
  return normed * gamma + beta, normed, inv_std, keep


@_compiled
def _residual_norm_backward(d_out, normed, inv_std, keep, gamma, rate, x_dtype: str,
                            residual_dtype: str):
  d_normed = d_out * gamma
  d_summed = inv_std * (d_normed - tf.reduce_mean(d_normed, -1, keepdims=True)
                        - normed * tf.reduce_mean(d_normed * normed, -1, keepdims=True))
  d_residual = tf.cast(d_summed, residual_dtype)
  d_x = apply_dropout(tf.cast(d_residual, x_dtype), keep, rate)
  return d_x, d_residual, d_out * normed


@_compiled
def _bias_gelu_forward(x, bias, gelu_dtype: str):
  """GELU(x + bias): the bias added in x's dtype, the GELU computed in `gelu_dtype` (as
  the unfused layer's activation), its output back in x's dtype (as the next product
  reads it)."""
  return tf.cast(gelu_value(tf.cast(x + bias, gelu_dtype)), x.dtype)


@_compiled
def _bias_gelu_backward(d_out, x, bias, gelu_dtype: str):
  d_inner = tf.cast(d_out, gelu_dtype) * gelu_derivative(tf.cast(x + bias, gelu_dtype))
  return tf.cast(d_inner, x.dtype)


# ---- the islands as differentiable functions --------------------------------------

def _tensors(*values):
  """Variables read as tensors: the islands take tensors (a custom gradient that saw a
  variable would have to return its gradient itself); the reads pass the gradients on."""
  return [tf.convert_to_tensor(v) for v in values]


def qkv_heads(query, key, value, query_bias, key_bias, value_bias, query_scale: float):
  @tf.custom_gradient
  def island(query, key, value, query_bias, key_bias, value_bias):
    def grad(d_query, d_key, d_value):
      d_inputs = _qkv_backward(d_query, d_key, d_value, query_scale)
      return (*d_inputs, *[_bias_gradient(d, 2) for d in d_inputs])
    return _qkv_forward(query, key, value, query_bias, key_bias, value_bias,
                        query_scale), grad
  return island(*_tensors(query, key, value, query_bias, key_bias, value_bias))


def masked_softmax_dropout(scores, mask, key, rate: float, layout=None):
  """softmax(scores + (1 - mask) * -1e9), then dropout with `key`'s mask (its units
  counted in `layout`, kept_units'). The softmax itself is TensorFlow's: its CPU kernel
  is faster than XLA's, whose row reductions are not vectorized (bench/RESULTS.md,
  "Figures moved from code comments")."""
  @tf.custom_gradient
  def island(scores, *key):
    # The scores come from the compiled q/k/v island, whose call grappler cannot see
    # through: without their shape stated here, its cost model meets a Softmax of
    # unknown rank and logs an error line for it in every run.
    scores = tf.ensure_shape(scores, scores.shape)
    probs = tf.nn.softmax(scores + (1.0 - mask[:, None]) * MASK_ADDER)
    if not key:
      return probs, lambda d: _softmax_backward(d, probs, None, rate)
    dropped, keep = _dropout_forward(probs, key[0], rate, layout)
    return dropped, lambda d: (_softmax_backward(d, probs, keep, rate), None)
  return island(scores, *([] if key is None else [key]))


def residual_norm(x, bias, key, residual, gamma, beta, rate: float, epsilon: float,
                  layout=None):
  """LayerNorm(residual + dropout(x + bias)), dropout with `key`'s mask (its units
  counted in `layout`, kept_units')."""
  @tf.custom_gradient
  def island(x, bias, residual, gamma, beta):
    out, normed, inv_std, keep = _residual_norm_forward(
        x, bias, key, layout, residual, gamma, beta, rate, epsilon)

    def grad(d_out):
      d_x, d_residual, d_scaled = _residual_norm_backward(
          d_out, normed, inv_std, keep, gamma, rate, x.dtype.name, residual.dtype.name)
      return (d_x, _bias_gradient(d_x), d_residual, _bias_gradient(d_scaled),
              _bias_gradient(d_out))
    return out, grad
  return island(*_tensors(x, bias, residual, gamma, beta))


def bias_gelu(x, bias, gelu_dtype: str):
  @tf.custom_gradient
  def island(x, bias):
    def grad(d_out):
      d_x = _bias_gelu_backward(d_out, x, bias, gelu_dtype)
      return d_x, _bias_gradient(d_x)
    return _bias_gelu_forward(x, bias, gelu_dtype), grad
  return island(*_tensors(x, bias))


# ---- the layer --------------------------------------------------------------------

class FusedTransformerEncoderBlock(tfm_layers.TransformerEncoderBlock):
  """tf-models-official's TransformerEncoderBlock, sublayers and variables unchanged,
  whose training call runs the elementwise work in the islands above. `exact_gelu`: the
  inner activation is the exact erf GELU (the islands compute it). Calls the islands do
  not cover (inference, other activations, pre-LN, float16), and every call with
  `fused` False (use_fused), run tfm's own; either way its dropouts are KeyedDropout."""

  fused = True

  def __init__(self, *args, exact_gelu: bool = False, **kwargs):
    super().__init__(*args, **kwargs)
    self.exact_gelu = exact_gelu

  def get_config(self):
    return {**super().get_config(), "exact_gelu": self.exact_gelu}

  def build(self, input_shape):
    super().build(input_shape)
    x_shape = input_shape[0] if isinstance(input_shape, (list, tuple)) else input_shape
    replace_block_dropouts(self, tf.TensorShape(x_shape), lambda old: KeyedDropout(
        old.rate, name=old.name, dtype=old.dtype_policy))
    # The attention probabilities [B, N, T, S] have two token axes; the rest [B, T, H].
    block_layers(self).probs_dropout.sequence_axes = (2, 3)

  def _fusable(self, inputs, output_range) -> bool:
    if not (isinstance(inputs, (list, tuple)) and len(inputs) == 2
            and inputs[1] is not None and output_range is None):
      return False
    if (not plain_post_layer_norm(self) or not self.exact_gelu
            or self.compute_dtype not in ("float32", "bfloat16")):
      return False
    # Keras builds the sublayers (and their variables) at the first call.
    return all(layer.built for layer in self.submodules
               if isinstance(layer, tf_keras.layers.Layer))

  def call(self, inputs, output_range=None, training=None):
    if not (self.fused and training is True and self._fusable(inputs, output_range)):
      return super().call(inputs, output_range)
    x, mask = inputs
    layers = block_layers(self)
    projections = [tf.einsum("abc,cde->abde", x, dense.kernel)
                   for dense in (layers.query, layers.key, layers.value)]
    query, key, value = qkv_heads(
        *projections, layers.query.bias, layers.key.bias, layers.value.bias,
        attention_scale(self))
    scores = tf.matmul(query, key, transpose_b=True)  # [B, N, T, S]
    dtype = x.dtype  # the compute dtype: Keras casts the layer's inputs to it
    probs_dropout = layers.probs_dropout
    probs = masked_softmax_dropout(scores, tf.cast(mask, dtype),
                                   dropout_key(probs_dropout), probs_dropout.rate,
                                   probs_dropout.layout(tf.shape(scores)))
    context = tf.transpose(tf.matmul(probs, value), [0, 2, 1, 3])  # [B, T, N, W]
    attention_dropout, output_dropout = layers.attention_dropout, layers.output_dropout
    attended = residual_norm(
        tf.einsum("abcd,cde->abe", context, layers.attention_output.kernel),
        layers.attention_output.bias,
        dropout_key(attention_dropout), x,
        layers.attention_norm.gamma, layers.attention_norm.beta, attention_dropout.rate,
        layers.attention_norm.epsilon, attention_dropout.layout(tf.shape(x)))
    # The LayerNorm's output is float32; the product reads it as its own layer would.
    inner = bias_gelu(
        tf.einsum("abc,cd->abd", tf.cast(attended, dtype), layers.intermediate.kernel),
        layers.intermediate.bias, layers.intermediate_activation.compute_dtype)
    return residual_norm(
        tf.einsum("abc,cd->abd", inner, layers.output.kernel),
        layers.output.bias, dropout_key(output_dropout), attended,
        layers.output_norm.gamma, layers.output_norm.beta, output_dropout.rate,
        layers.output_norm.epsilon, output_dropout.layout(tf.shape(attended)))


def use_fused(model: tf_keras.layers.Layer, fused: bool):
  """Turns the fused islands on or off in every fused block inside `model` (on by
  default); the variables and the dropout draws are the same either way."""
  for module in [model, *model.submodules]:
    if isinstance(module, FusedTransformerEncoderBlock):
      module.fused = fused
