"""model/encoder.py's gradient checkpointing (`recompute: true`) and GELU gradient:
recomputation gives the same loss, gradients and dropout masks as keeping the
activations, with dropout on."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from model import encoder
from pretrain.objectives import objective_for
from pretrain.model import PretrainingModel
from training.runtime import use_checkpointed_dropout
from tests.helpers import (SPECIAL, dropout_states, make_batch, one_layer,
                           set_dropout_states, tiny_config)


def test_pretraining_loss_and_gradients_equal_with_recompute():
  use_checkpointed_dropout(7)  # dropout on, from checkpointed generators
  config = tiny_config(model_hparam_overrides={
      "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
      "intermediate_size": 64, "max_position_embeddings": 128,
      "hidden_dropout_prob": 0.2, "attention_probs_dropout_prob": 0.2})
  model = PretrainingModel(config, SPECIAL).build_variables(16)
  batch = make_batch(np.random.default_rng(0))

  @tf.function(autograph=False)  # as the training loop's step
  def loss_and_gradients():
    with tf.GradientTape() as tape:
      loss, _ = objective_for(config).compute(model, batch, tf.constant([1, 2]),
                                              training=True)
    return loss, tape.gradient(loss, model.trainable_variables)

  before = dropout_states(model)
  results = {}
  for recompute in (False, True):
    set_dropout_states(model, before)
    encoder.use_recompute(model, recompute)
    loss, grads = loss_and_gradients()
    results[recompute] = (float(loss), [tf.convert_to_tensor(g).numpy() for g in grads],
                          dropout_states(model))
  (loss, grads, after), (loss_r, grads_r, after_r) = results[False], results[True]
  assert loss_r == pytest.approx(loss, rel=1e-6)
  assert len(grads) == len(model.trainable_variables) > 40
  for variable, g, g_r in zip(model.trainable_variables, grads, grads_r):
    assert np.abs(g).max() > 0, variable.name
    np.testing.assert_allclose(g_r, g, rtol=1e-4, atol=1e-6, err_msg=variable.name)
  # The recomputation leaves the generators where one forward pass does, so the next
  # step draws what it would have drawn without recompute.
  for state, state_r in zip(after, after_r):
    np.testing.assert_array_equal(state_r, state)
  # Dropout did draw: in attention and after both sublayers of the 4 transformer layers
  # (inner dropout, rate 0, does not).
  assert sum((a != b).any() for a, b in zip(after, before)) >= 3 * 4


def test_recomputation_redraws_the_forward_dropout_masks():
  """Without putting the generators back, a recomputed layer drops other units and
  its gradients differ: the test above would catch a recompute that did not."""
  layer, x = one_layer(0.3, seed=3)
  mask = tf.ones([2, 6, 6])
  layer([x, mask])
  weights = tf.random.stateless_normal([2, 6, 16], [0, 2])
  naive = tf.recompute_grad(lambda x, mask: layer([x, mask], training=True))

  def input_gradient(call):
    before = dropout_states(layer)

    @tf.function(autograph=False)
    def run():
      with tf.GradientTape() as tape:
        tape.watch(x)
        loss = tf.reduce_sum(call(x, mask) * weights)
      return tape.gradient(loss, x)
    gradient = run().numpy()
    set_dropout_states(layer, before)
    return gradient

  kept = input_gradient(lambda x, mask: layer([x, mask], training=True))
  np.testing.assert_allclose(input_gradient(
      lambda x, mask: encoder.recomputed_call(layer, x, mask)), kept, rtol=1e-5,
                             atol=1e-6)
  assert np.abs(input_gradient(naive) - kept).max() > 1e-2


def test_gelu_equals_tf_keras_exact_gelu_and_its_autodiff_gradient():
  x = tf.constant(np.linspace(-12, 12, 4001), tf.float32)
  with tf.GradientTape(persistent=True) as tape:
    tape.watch(x)
    ours, reference = encoder.gelu(x), tf_keras.activations.gelu(x)
  np.testing.assert_array_equal(ours.numpy(), reference.numpy())  # same ops
  np.testing.assert_allclose(tape.gradient(ours, x).numpy(),
                             tape.gradient(reference, x).numpy(), rtol=1e-5, atol=1e-6)


def test_recompute_refuses_legacy_dropout():
  tf_keras.backend.experimental.disable_tf_random_generator()
  try:
    config = encoder.ModelConfig(vocab_size=30, hidden_size=16, num_hidden_layers=1,
                                 num_attention_heads=2, intermediate_size=32)
    layer = encoder.ElectraEncoder(config).transformer_layers[0]
    layer([tf.zeros([1, 4, 16]), tf.ones([1, 4, 4])])
    with pytest.raises(ValueError, match="recompute: dropout layer .* legacy stateful"):
      encoder.recomputed_call(layer, tf.zeros([1, 4, 16]), tf.ones([1, 4, 4]))
  finally:
    tf_keras.backend.experimental.enable_tf_random_generator()
