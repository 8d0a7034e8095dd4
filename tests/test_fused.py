"""model/fused.py: the fused transformer layer gives the loss and gradients of
the unfused one, dropout off and on (same seed, same masks), and keeps every variable's
name and shape."""

import re

import numpy as np
import pytest
import tensorflow as tf
import tf_keras
from official.nlp.modeling import layers as tfm_layers

from model import encoder, fused
from pretrain.objectives import objective_for
from pretrain.model import PretrainingModel
from training.runtime import use_checkpointed_dropout
from tests.helpers import (SPECIAL, dropout_states, make_batch, one_layer,
                           set_dropout_states, tiny_config)


def fused_and_unfused(model, run):
  """run() with the fused layers, then without, from the same dropout states: (result,
  dropout states after) for each, fused first."""
  before = dropout_states(model)
  results = []
  for on in (True, False):
    set_dropout_states(model, before)
    fused.use_fused(model, on)
    results.append((run(), dropout_states(model)))
  fused.use_fused(model, True)
  return results


@pytest.mark.parametrize("dropout", [0.0, 0.2])
def test_pretraining_loss_and_gradients_equal_fused_and_unfused(dropout):
  use_checkpointed_dropout(11)
  # One layer per tower: each fused block's input gradient still flows on, into the
  # embeddings both towers share. A generator of the discriminator's size: the towers
  # then share each island's compilation (one per shape), the most of this test's time.
  config = tiny_config(generator_hidden_size=1.0, model_hparam_overrides={
      "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
      "intermediate_size": 64, "max_position_embeddings": 128,
      "hidden_dropout_prob": dropout, "attention_probs_dropout_prob": dropout})
  model = PretrainingModel(config, SPECIAL).build_variables(16)
  batch = make_batch(np.random.default_rng(0))  # with padding: the mask matters
  blocks = [m for m in model.submodules if isinstance(m, fused.FusedTransformerEncoderBlock)]
  assert len(blocks) == 2 and all(block.fused for block in blocks)

  def loss_and_gradients():
    # A new trace for each setting: use_fused changes what the Python code builds.
    @tf.function(autograph=False)  # as the training loop's step
    def run():
      with tf.GradientTape() as tape:
        loss, _ = objective_for(config).compute(model, batch, tf.constant([1, 2]),
                                                training=True)
      return loss, tape.gradient(loss, model.trainable_variables)
    loss, grads = run()
    return float(loss), [tf.convert_to_tensor(g).numpy() for g in grads]

  ((loss, grads), after), ((loss_u, grads_u), after_u) = fused_and_unfused(
      model, loss_and_gradients)
  assert loss == pytest.approx(loss_u, rel=1e-5)
  assert len(grads) == len(model.trainable_variables) > 2 * 16  # 16 per block
  for variable, g, g_u in zip(model.trainable_variables, grads, grads_u):
    # The key bias's true gradient is 0 (softmax ignores a per-row constant): both
    # paths give float rounding noise there, compared against the layer's scale.
    scale = np.abs(g_u).max()
    if "key/bias" not in variable.name:
      assert scale > 0, variable.name
    np.testing.assert_allclose(g, g_u, rtol=1e-4, atol=1e-5 * max(scale, 1e-3),
                               err_msg=variable.name)
  for state, state_u in zip(after, after_u):  # the same draws, as many
    np.testing.assert_array_equal(state, state_u)


# model/fused.py's compiled islands, by name (the unfused layer's KeyedDropout calls a
# compiled function of its own, which is not one).
ISLANDS = {function.__name__ for function in vars(fused).values()
           if isinstance(function, tf.types.experimental.PolymorphicFunction)}


def islands_in(run) -> int:
  """How many calls of model/fused.py's compiled islands the trace of `run` holds."""
  graph = run.get_concrete_function().graph
  called = [re.sub(r"^__inference_|_\d+$", "", op.get_attr("f").name)
            for op in graph.get_operations()
            if op.type in ("StatefulPartitionedCall", "PartitionedCall")]
  return len([name for name in called if name in ISLANDS])


def output_gradients_and_islands(layer, x, mask, weights):
  """The layer's training output on (x, mask), the gradients of sum(output * weights)
  (the input's, then every variable's), and how many islands the step's trace holds."""
  @tf.function(autograph=False)
  def run():
    with tf.GradientTape() as tape:
      tape.watch(x)
      out = layer([x, mask], training=True)
      loss = tf.reduce_sum(out * weights)
    return out, tape.gradient(loss, [x] + layer.trainable_variables)
  out, grads = run()
  return out, grads, islands_in(run)


def test_fused_layer_runs_its_islands_and_drops_the_same_units():
  """With a large dropout rate and a causal mask, unfused and fused outputs and
  gradients (the input's and every variable's) agree element for element: a fused path
  drawing other masks (or none) would differ in about half the units; and the fused
  trace holds the compiled islands, the unfused one none."""
  layer, x = one_layer(0.5, seed=5)
  mask = tf.constant(np.tril(np.ones([6, 6], np.float32))[None].repeat(2, 0))
  layer([x, mask])
  weights = tf.random.stateless_normal(x.shape, [3, 4])  # a loss that weighs each unit

  ((out, grads, islands), _), ((out_u, grads_u, islands_u), _) = fused_and_unfused(
      layer, lambda: output_gradients_and_islands(layer, x, mask, weights))
  assert islands >= 5 and islands_u == 0
  np.testing.assert_allclose(out, out_u, rtol=1e-5, atol=1e-5)
  assert len(grads) == 17  # the input and the 16 variables
  for g, g_u in zip(grads, grads_u):
    # As above: the key bias's gradient is rounding noise about 0, hence the floor.
    np.testing.assert_allclose(g, g_u, rtol=1e-4, atol=1e-5 * max(np.abs(g_u).max(), 1e-3))
  # Inference runs tf-models-official's own call.
  np.testing.assert_array_equal(layer([x, mask], training=False).numpy(),
                                tf.function(lambda: layer([x, mask]))().numpy())


# bfloat16 keeps 8 significant bits: one rounding moves a value by up to 2^-8 of it.
BF16_ROUNDING = 2.0 ** -8


def test_under_mixed_bfloat16_the_fused_layer_equals_the_unfused_one():
  """Under mixed_bfloat16 the fused layer runs its islands in the unfused layer's dtypes
  (products, bias adds, softmax, dropout and the first residual in bfloat16, LayerNorms,
  GELU and the second residual in float32), so output and gradients (the input's and
  every variable's) agree within a few bfloat16 roundings; at dropout 0.5 with padding,
  other dropout draws would differ by the values themselves in about half the units.

  Tolerance: the paths round at different places (XLA keeps float32 between the ops of
  an island where TensorFlow rounds every op's output to bfloat16; the products sum in
  another order), each a relative error up to 2^-8, a few such in a row before the
  float32 LayerNorm: 4 roundings of the tensor's largest value (seen: 0.4 on the output,
  at most 1.8 on the gradients)."""
  tf_keras.mixed_precision.set_global_policy("mixed_bfloat16")
  layer, x = one_layer(0.5, seed=7)
  mask = np.ones([2, 6, 6], np.float32)
  mask[1, :, 4:] = 0  # the second sequence is 4 tokens and 2 of padding
  mask = tf.constant(mask)
  layer([x, mask])
  assert layer.compute_dtype == "bfloat16"
  weights = tf.random.stateless_normal(x.shape, [3, 4])

  ((out, grads, islands), after), ((out_u, grads_u, islands_u), after_u) = (
      fused_and_unfused(layer, lambda: output_gradients_and_islands(layer, x, mask,
                                                                    weights)))
  assert islands >= 5 and islands_u == 0
  # As the unfused layer: a float32 output (its last LayerNorm's), float32 gradients.
  assert out.dtype == out_u.dtype == tf.float32
  tolerance = 4 * BF16_ROUNDING
  np.testing.assert_allclose(out, out_u, rtol=0, atol=tolerance * np.abs(out_u).max())
  names = ["input"] + [variable.name for variable in layer.trainable_variables]
  assert len(grads) == 17  # the input and the 16 variables
  scales = {name: np.abs(g_u).max() for name, g_u in zip(names, grads_u)}
  for name, g, g_u in zip(names, grads, grads_u):
    assert g.dtype == g_u.dtype == tf.float32
    # The key bias's true gradient is 0: both paths give rounding noise about it,
    # compared against the scale of the key kernel's gradient.
    scale = scales[name.replace("key/bias", "key/kernel")]
    np.testing.assert_allclose(g, g_u, rtol=0, atol=tolerance * scale, err_msg=name)
  for state, state_u in zip(after, after_u):  # the same draws, as many
    np.testing.assert_array_equal(state, state_u)


def test_under_mixed_float16_the_layer_runs_tfm_own_call():
  """The islands do not cover float16 (its masked softmax adds another constant):
  under mixed_float16 the fused block's training call is tf-models-official's (no
  island in its trace), its output the unfused one bit for bit, dropout draws
  included."""
  tf_keras.mixed_precision.set_global_policy("mixed_float16")
  layer, x = one_layer(0.5, seed=7)
  mask = tf.ones([2, 6, 6])
  layer([x, mask])
  assert layer.compute_dtype == "float16"

  def output_and_islands():
    run = tf.function(lambda: layer([x, mask], training=True), autograph=False)
    return run().numpy(), islands_in(run)

  ((out, islands), after), ((out_u, _), after_u) = fused_and_unfused(
      layer, output_and_islands)
  assert islands == 0
  np.testing.assert_array_equal(out, out_u)
  for state, state_u in zip(after, after_u):
    np.testing.assert_array_equal(state, state_u)


def test_fused_block_keeps_tfm_variable_names_shapes_and_checkpoint_keys(tmp_path):
  use_checkpointed_dropout(1)
  kwargs = dict(num_attention_heads=2, inner_dim=32, inner_activation=encoder.gelu,
                output_dropout=0.1, attention_dropout=0.1, norm_first=False,
                norm_epsilon=1e-12, name="layer_0")
  x, mask = tf.zeros([1, 4, 16]), tf.ones([1, 4, 4])
  blocks = [fused.FusedTransformerEncoderBlock(exact_gelu=True, **kwargs),
            tfm_layers.TransformerEncoderBlock(**kwargs)]
  keys = []
  for i, block in enumerate(blocks):
    block([x, mask], training=True)  # builds (tfm's call)
    block([x, mask], training=True)  # the fused block's own call
    path = tf.train.Checkpoint(layer=block).write(str(tmp_path / f"block{i}"))
    keys.append(sorted((name, tuple(shape)) for name, shape in tf.train.list_variables(path)
                       if "_CHECKPOINTABLE_OBJECT_GRAPH" not in name))
  names = [[(v.name, tuple(v.shape)) for v in block.weights] for block in blocks]
  assert names[0] == names[1] and len(names[0]) == 16
  assert keys[0] == keys[1]
