"""mixed_bfloat16 against float32: one pre-training and one fine-tuning step (losses and
gradients, from the same weights) agree to bf16 tolerance; variables, optimizer slots,
logits and losses stay float32.

Tolerance: bfloat16 keeps 8 significant bits, a relative rounding error of up to
2^-8 = 0.0039 per rounding. Weights and activations are rounded at every matmul input
while sums, LayerNorms, logits and losses stay float32, so a loss carries a few such
errors (rtol 1e-2, about 2.5 roundings; seen: 7e-5 pre-training, 7e-4 to 3.5e-3
fine-tuning) and gradients, back through every layer, more: each tensor's relative
error (norm of the difference over the float32 norm) below 0.1 (seen: at most 0.025
and 0.011), all gradients together below 3e-2 (seen: 0.011 and 0.006). The gradient
checks are the sharp ones: float32 gradients on another batch differ by 0.24 and 1.8.
One layer per tower (with two the errors seen were alike: 0.025 and 0.032 per tensor):
every layer's matmuls round alike, so a second adds time, not a case.
Dropout is off: its masks draw in the compute
dtype, so bf16 and float32 would drop different units.
"""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from finetune.modeling import FinetuningModel
from finetune.sentence.model import SentenceHead
from model.config import ModelConfig
from pretrain.config import load_config
from pretrain.objectives import objective_for
from pretrain.model import PretrainingModel, SpecialTokens
from tests.helpers import Objective, padded_batch
from training.loop import LoopSettings, TrainLoop
from training.optimization import create_optimizer

SPECIAL = SpecialTokens(cls_id=2, sep_id=3, mask_id=4)
VOCAB = 60
LOSS_RTOL = 1e-2
GRAD_RTOL = 0.1
ALL_GRADS_RTOL = 3e-2
NO_DROPOUT = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}


def pretraining_config():
  return load_config("electra_small", "unused_data_dir", {
      "debug": True, "vocab_size": VOCAB, "max_seq_length": 16, "embedding_size": 24,
      # The discriminator's size: both towers then share each fused island's
      # compilation (one per shape and dtype), most of this test's time.
      "generator_hidden_size": 1.0, "model_hparam_overrides": {
          "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
          "intermediate_size": 64, "max_position_embeddings": 16, **NO_DROPOUT}})


def pretraining_batch(rng, batch=4, seq=16):
  input_ids = rng.integers(5, VOCAB, (batch, seq)).astype(np.int32)
  input_ids[:, 0], input_ids[:, seq // 2], input_ids[:, -1] = 2, 3, 3
  segment_ids = np.zeros((batch, seq), np.int32)
  segment_ids[:, seq // 2 + 1:] = 1
  return {"input_ids": input_ids, "input_mask": np.ones((batch, seq), np.int32),
          "segment_ids": segment_ids}


def finetuning_batch(rng, batch=4, seq=12):
  return {"input_ids": rng.integers(5, VOCAB, (batch, seq)).astype(np.int32),
          "input_mask": np.ones((batch, seq), np.int32),
          "segment_ids": np.zeros((batch, seq), np.int32),
          "label": rng.integers(0, 3, batch).astype(np.int32)}


def make_pretraining_model():
  return PretrainingModel(pretraining_config(), SPECIAL).build_variables(16)


def make_finetuning_model():
  config = ModelConfig.from_dict(dict(vocab_size=VOCAB, hidden_size=32,
                                      num_hidden_layers=1, num_attention_heads=2,
                                      intermediate_size=64, embedding_size=24,
                                      max_position_embeddings=16, **NO_DROPOUT))
  return FinetuningModel(config, {"t": SentenceHead(3, 0.0)}).build_variables(
      padded_batch(VOCAB, seq=16))


def pretraining_loss(model):
  seed = tf.constant([5, 6])

  def loss_fn(batch, *_):
    loss, outputs = objective_for(model.pretraining_config).compute(
        model, batch, seed, training=True)
    return loss, {key: outputs[key] for key in ("mlm_loss", "disc_loss", "sampled_ids",
                                                 "disc_logits")}
  return loss_fn


def finetuning_loss(model):
  def loss_fn(batch, *_):
    logits = model(batch, training=True)["t"]
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        batch["label"], logits)), {"logits": logits}
  return loss_fn


def loss_and_gradients(make_model, make_loss, batch, weights, policy):
  """(loss, outputs, gradients, model) of one step from `weights` under `policy`."""
  tf_keras.mixed_precision.set_global_policy(policy)
  try:
    model = make_model()
    model.set_weights(weights)
    with tf.GradientTape() as tape:
      loss, outputs = make_loss(model)(batch)
    gradients = tape.gradient(loss, model.trainable_variables)
  finally:
    tf_keras.mixed_precision.set_global_policy("float32")
  return loss, outputs, [tf.convert_to_tensor(g) for g in gradients], model


def relative_error(got, want):
  return float(tf.norm(got - want) / tf.norm(want))


@pytest.mark.parametrize("phase", ["pretraining", "finetuning"])
def test_bf16_step_agrees_with_float32(phase):
  rng = np.random.default_rng(0)
  if phase == "pretraining":
    make_model, make_loss, batch = (make_pretraining_model, pretraining_loss,
                                    pretraining_batch(rng))
  else:
    make_model, make_loss, batch = (make_finetuning_model, finetuning_loss,
                                    finetuning_batch(rng))
  weights = make_model().get_weights()
  want_loss, want, want_grads, _ = loss_and_gradients(make_model, make_loss, batch,
                                                      weights, "float32")
  loss, got, grads, model = loss_and_gradients(make_model, make_loss, batch, weights,
                                               "mixed_bfloat16")

  # The bf16 path really ran: matmuls in bfloat16, so results differ from float32.
  dense = [layer for layer in model.submodules if isinstance(layer, tf_keras.layers.Dense)]
  assert dense and all(layer.compute_dtype == "bfloat16" for layer in dense)
  assert float(loss) != float(want_loss)
  # Master weights, gradients, LayerNorms, logits and losses are float32.
  norms = [layer for layer in model.submodules
           if isinstance(layer, tf_keras.layers.LayerNormalization)]
  assert norms and all(layer.compute_dtype == "float32" for layer in norms)
  assert all(v.dtype == tf.float32 for v in model.variables)
  assert all(g.dtype == tf.float32 for g in grads)
  assert loss.dtype == tf.float32
  for key, value in got.items():
    if value.dtype.is_floating:
      assert value.dtype == tf.float32, key
  if phase == "pretraining":
    # Same generator samples, so the discriminators saw the same corrupted input.
    np.testing.assert_array_equal(got["sampled_ids"], want["sampled_ids"])
    for key in ("mlm_loss", "disc_loss"):
      np.testing.assert_allclose(float(got[key]), float(want[key]), rtol=LOSS_RTOL,
                                 err_msg=key)
  np.testing.assert_allclose(float(loss), float(want_loss), rtol=LOSS_RTOL)
  flat = lambda tensors: tf.concat([tf.reshape(t, [-1]) for t in tensors], 0)
  scale = float(tf.norm(flat(want_grads)))
  errors = []
  for variable, g, w in zip(model.trainable_variables, grads, want_grads):
    if "/key/bias" in variable.name:
      # Softmax ignores a shift shared by a query's scores: zero in exact arithmetic,
      # rounding noise in both precisions.
      assert max(float(tf.norm(g)), float(tf.norm(w))) < 1e-5 * scale, variable.name
    else:
      errors.append(relative_error(g, w))
  assert max(errors) < GRAD_RTOL, max(errors)
  assert relative_error(flat(grads), flat(want_grads)) < ALL_GRADS_RTOL


def test_bf16_training_step_keeps_float32_variables_and_slots(tmp_path):
  """One real TrainLoop step (AdamW with layer-wise rates, clipping) under bf16."""
  tf_keras.mixed_precision.set_global_policy("mixed_bfloat16")
  try:
    model = make_finetuning_model()
    optimizer = create_optimizer(1e-3, 10, 0, 0.01, lr_multiplier=model.lr_multiplier(0.8))
    before = [w.copy() for w in model.get_weights()]
    settings = LoopSettings(model_dir=str(tmp_path), num_train_steps=1,
                                     log_every_steps=1)
    batch = finetuning_batch(np.random.default_rng(1))
    loss_fn = finetuning_loss(model)
    TrainLoop(tf.distribute.get_strategy(), model, optimizer,
              Objective(lambda _, b, *__: (loss_fn(b)[0], {})), settings).run(
                  lambda ctx: tf.data.Dataset.from_tensors(batch).repeat())
  finally:
    tf_keras.mixed_precision.set_global_policy("float32")
  assert all(v.dtype == tf.float32 for v in model.variables)
  slots = [v for v in optimizer.variables() if v.dtype.is_floating]
  assert slots and all(v.dtype == tf.float32 for v in slots)
  moved = [not np.array_equal(a, b) for a, b in zip(before, model.get_weights())]
  assert sum(moved) == len(moved)  # every variable was updated (all get gradients)
