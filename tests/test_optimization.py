"""training/optimization.py against a NumPy transcription of the original's update rule."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from training import optimization
from tests.helpers import ROOT


def reference_learning_rate(step, lr, total, warmup, power):
  decayed = lr * (1.0 - min(step, total) / total) ** power
  return decayed * (min(1.0, step / warmup) if warmup else 1.0)


def reference_adamw(params, grads_per_step, *, lr, total, warmup, power, decay_rate,
                    decayed_names, multipliers):
  """Original AdamWeightDecayOptimizer + clip_by_global_norm(1.0), step by step."""
  params = {k: v.astype(np.float64) for k, v in params.items()}
  m = {k: np.zeros_like(v) for k, v in params.items()}
  v = {k: np.zeros_like(p) for k, p in params.items()}
  for step, grads in enumerate(grads_per_step):
    norm = np.sqrt(sum(np.sum(g.astype(np.float64) ** 2) for g in grads.values()))
    scale = 1.0 / max(norm, 1.0)
    rate = reference_learning_rate(step, lr, total, warmup, power)
    for name, g in grads.items():
      g = g * scale
      m[name] = 0.9 * m[name] + 0.1 * g
      v[name] = 0.999 * v[name] + 0.001 * g * g
      update = m[name] / (np.sqrt(v[name]) + 1e-6)
      if name in decayed_names:
        update = update + decay_rate * params[name]
      multiplier = multipliers.get(name, 1.0)
      if callable(multiplier):
        multiplier = multiplier(step)
      params[name] = params[name] - rate * multiplier * update
  return params, m, v


def test_schedule_matches_formula():
  for power in (1.0, 0.5, 2.0):
    schedule = optimization.WarmupPolynomialDecay(2e-4, 1000, 100, power=power)
    for step in (0, 1, 50, 99, 100, 101, 500, 999, 1000, 1500):
      np.testing.assert_allclose(
          float(schedule(step)), reference_learning_rate(step, 2e-4, 1000, 100, power),
          rtol=1e-5, atol=1e-12)
  no_warmup = optimization.WarmupPolynomialDecay(1e-3, 10, 0)
  assert float(no_warmup(0)) == pytest.approx(1e-3)
  assert float(no_warmup(5)) == pytest.approx(5e-4)


def test_schedule_rejects_no_steps():
  with pytest.raises(ValueError, match="num_train_steps"):
    optimization.WarmupPolynomialDecay(1e-3, 0, 0)


@pytest.mark.parametrize("name,decayed", [
    ("electra/discriminator/layer_0/self_attention/query/kernel:0", True),
    ("electra/discriminator/layer_0/self_attention/query/bias:0", False),
    ("layer_0/self_attention_layer_norm/gamma:0", False),
    ("layer_0/output_layer_norm/beta:0", False),
    ("embeddings/layer_norm/gamma/replica_1:0", False),
    ("electra/embeddings/LayerNorm/beta", False),
    ("generator_predictions/output_bias:0", False),
    ("embeddings/word_embeddings/embeddings:0", True),
    ("embeddings_project/kernel/replica_3:0", True),
])
def test_weight_decay_exclusion_by_name(name, decayed):
  variable = type("Var", (), {"name": name})()
  assert optimization.uses_weight_decay(variable) == decayed


def test_weight_decay_skips_layer_norm_and_biases_of_a_real_block():
  """Zero gradients: only the decay term moves weights, and only non-LN, non-bias ones."""
  from official.nlp.modeling import layers as tfm_layers
  block = tfm_layers.TransformerEncoderBlock(num_attention_heads=2, inner_dim=16,
                                             inner_activation="relu")
  block(tf.ones([1, 3, 8]))
  variables = block.trainable_variables
  assert any(len(v.shape) == 2 and v.name.endswith("bias:0") for v in variables)
  rng = np.random.default_rng(0)
  for var in variables:  # non-zero everywhere, so a decayed bias would move
    var.assign(rng.normal(size=var.shape).astype(np.float32))
  before = [v.numpy().copy() for v in variables]
  optimizer = optimization.create_optimizer(0.1, 10, 0, weight_decay_rate=0.5)
  optimizer.apply_gradients([(tf.zeros_like(v), v) for v in variables])
  decayed = 0
  for var, old in zip(variables, before):
    if "bias" in var.name or "layer_norm" in var.name:
      np.testing.assert_array_equal(var.numpy(), old, err_msg=var.name)
    else:
      np.testing.assert_allclose(var.numpy(), old * (1 - 0.1 * 0.5), rtol=1e-6)
      decayed += 1
  assert decayed == 6  # q, k, v, attention output, intermediate and output kernels


def make_problem(seed=0):
  rng = np.random.default_rng(seed)
  params = {
      "dense/kernel": rng.normal(size=(4, 3)).astype(np.float32),
      "dense/bias": rng.normal(size=(3,)).astype(np.float32),
      "attention/query/bias": rng.normal(size=(2, 2)).astype(np.float32),
      "layer_norm/gamma": rng.normal(size=(3,)).astype(np.float32),
      "embeddings": rng.normal(size=(6, 2)).astype(np.float32),
  }
  # Step 0 has a large global norm (clipped), later steps small ones (not clipped).
  grads = [{k: (5.0 if step == 0 else 0.1) * rng.normal(size=v.shape).astype(np.float32)
            for k, v in params.items()} for step in range(6)]
  return params, grads


def reference_own_warmup(multiplier, own, shared):
  """The multiplier that swaps the shared warmup (3 steps) for one of `own` steps."""
  return lambda step: 0.0 if step == 0 else \
      multiplier * min(1.0, step / own) / min(1.0, step / shared)


@pytest.mark.parametrize("power,multiplied", [(1.0, None), (2.0, "constant"),
                                              (1.0, "own_warmup")])
def test_steps_match_numpy_reference(power, multiplied):
  params, grads = make_problem()
  multipliers = {"dense/kernel": 0.5, "embeddings": 2.0} if multiplied else {}
  used = dict(multipliers)
  if multiplied == "own_warmup":  # a warmup of 5 steps, the schedule's being 3
    used["dense/kernel"] = optimization.own_warmup(0.5, 5, 3)
    multipliers["dense/kernel"] = reference_own_warmup(0.5, 5, 3)
  variables = {k: tf.Variable(v, name=k) for k, v in params.items()}
  optimizer = optimization.create_optimizer(
      0.05, num_train_steps=8, num_warmup_steps=3, weight_decay_rate=0.1,
      lr_decay_power=power,
      lr_multiplier=(lambda var: used.get(var.name[:-2], 1.0)) if multiplied else None)

  @tf.function
  def step(step_grads):
    pairs = []
    for name, var in variables.items():
      grad = tf.convert_to_tensor(step_grads[name])
      if name == "embeddings":  # embedding lookups give sparse gradients
        grad = tf.IndexedSlices(grad, tf.range(6))
      pairs.append((grad, var))
    optimizer.apply_gradients(pairs)

  for step_grads in grads:
    step(step_grads)
  expected, m, v = reference_adamw(
      params, grads, lr=0.05, total=8, warmup=3, power=power, decay_rate=0.1,
      decayed_names={"dense/kernel", "embeddings"}, multipliers=multipliers)
  assert int(optimizer.iterations) == len(grads)
  for name, var in variables.items():
    np.testing.assert_allclose(var.numpy(), expected[name], rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(optimizer.get_slot(var, "adam_m").numpy(), m[name],
                               rtol=2e-5, atol=1e-7)
    np.testing.assert_allclose(optimizer.get_slot(var, "adam_v").numpy(), v[name],
                               rtol=2e-5, atol=1e-9)


def test_clipping_uses_the_global_norm():
  a = tf.Variable(tf.zeros([2]))
  b = tf.Variable(tf.zeros([2]))
  optimizer = optimization.create_optimizer(1e-3, 10, 0)
  optimizer.apply_gradients([(tf.constant([3.0, 0.0]), a), (tf.constant([0.0, 4.0]), b)])
  # Global norm 5 -> gradients scaled by 1/5 before m = 0.1 * g.
  np.testing.assert_allclose(optimizer.get_slot(a, "adam_m").numpy(), [0.06, 0.0],
                             rtol=1e-6)
  np.testing.assert_allclose(optimizer.get_slot(b, "adam_m").numpy(), [0.0, 0.08],
                             rtol=1e-6)
  optimizer.apply_gradients([(tf.constant([0.3, 0.0]), a), (tf.constant([0.0, 0.4]), b)])
  # Norm 0.5 < 1: left as is.
  np.testing.assert_allclose(optimizer.get_slot(a, "adam_m").numpy(),
                             [0.9 * 0.06 + 0.1 * 0.3, 0.0], rtol=1e-6)


def test_checkpoint_round_trip(tmp_path):
  var = tf.Variable(tf.ones([3]), name="w")
  optimizer = optimization.create_optimizer(1e-2, 10, 2)
  optimizer.apply_gradients([(tf.constant([1.0, 2.0, 3.0]), var)])
  optimizer.apply_gradients([(tf.constant([1.0, -2.0, 0.5]), var)])
  path = tf.train.Checkpoint(var=var, optimizer=optimizer).save(str(tmp_path / "ckpt"))

  restored_var = tf.Variable(tf.zeros([3]), name="w")
  restored = optimization.create_optimizer(1e-2, 10, 2)
  tf.train.Checkpoint(var=restored_var, optimizer=restored).restore(path)
  assert int(restored.iterations) == 2
  restored.apply_gradients([(tf.zeros([3]), restored_var)])  # creates slots, restored
  optimizer.apply_gradients([(tf.zeros([3]), var)])
  for slot in optimization.SLOT_NAMES:
    np.testing.assert_allclose(restored.get_slot(restored_var, slot).numpy(),
                               optimizer.get_slot(var, slot).numpy())
  np.testing.assert_allclose(restored_var.numpy(), var.numpy())


def test_learning_rate_at_and_loss_scale_optimizer():
  optimizer = optimization.create_optimizer(1e-3, 100, 10)
  assert float(optimizer.learning_rate_at(5)) == pytest.approx(
      reference_learning_rate(5, 1e-3, 100, 10, 1.0))
  wrapped = tf_keras.mixed_precision.LossScaleOptimizer(optimizer)
  var = tf.Variable([1.0, -1.0])
  scaled = tf.constant([2.0, 2.0]) * wrapped.loss_scale
  wrapped.apply_gradients([(wrapped.get_unscaled_gradients([scaled])[0], var)])
  assert int(optimizer.iterations) == 1
  np.testing.assert_allclose(optimizer.get_slot(var, "adam_m").numpy(),
                             [0.1 * 2 / np.sqrt(8)] * 2, rtol=1e-5)


MIRRORED_SCRIPT = textwrap.dedent("""
    import numpy as np
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from training import optimization

    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])

    # Each replica's gradient has norm < 1, their sum 1.13: clipped only after the sum.
    grads = [np.array([[0.6, 0.3]], np.float32), np.array([[0.2, 0.5]], np.float32)]
    with strategy.scope():
      var = tf.Variable([[1.0, 2.0]], name="layer/kernel")
      bias = tf.Variable([0.5], name="layer/bias")
      optimizer = optimization.create_optimizer(
          0.1, 10, 0, weight_decay_rate=0.5,
          lr_multiplier=lambda v: 0.5 if v.name == "layer/kernel:0" else 1.0)

    @tf.function
    def step():
      def replica_fn():
        ctx = tf.distribute.get_replica_context()
        g = tf.gather(tf.constant(np.stack(grads)), ctx.replica_id_in_sync_group)
        optimizer.apply_gradients([(g, var), (tf.constant([0.0]), bias)])
      strategy.run(replica_fn)
    step()
    g = grads[0] + grads[1]
    g = g / np.sqrt(np.sum(g ** 2))
    m = 0.1 * g
    v = 0.001 * g * g
    expected = np.array([[1.0, 2.0]]) - 0.1 * 0.5 * (
        m / (np.sqrt(v) + 1e-6) + 0.5 * np.array([[1.0, 2.0]]))
    for copy in var.values:
      np.testing.assert_allclose(copy.numpy(), expected, rtol=1e-5)
    np.testing.assert_allclose(optimizer.get_slot(var, "adam_m").numpy(), m, rtol=1e-5)
    np.testing.assert_allclose(bias.numpy(), [0.5])
    print("MIRRORED_OK")
""")


def test_mirrored_strategy_sums_then_clips_then_updates():
  """Two CPU replicas: gradients summed over replicas, clipped, then applied once."""
  # A fresh process: logical devices must be configured before TensorFlow starts.
  env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2")
  result = subprocess.run([sys.executable, "-c", MIRRORED_SCRIPT], env=env,
                          capture_output=True, text=True, timeout=300)
  assert "MIRRORED_OK" in result.stdout, result.stderr[-3000:]


def rule_in_float32(params, m, v, grads, rate, multipliers, variables):
  """One step of the rule on the arrays in place, its float32 operations in the order of
  the formula as written before it was compiled: `grads` clipped and dense, `rate` the
  schedule's, `multipliers` by name (1 for the others), the decay 0.01 where
  `variables` (by name) take it."""
  f32 = np.float32
  for name, g in grads.items():
    m[name] = f32(0.9) * m[name] + f32(1.0 - 0.9) * g
    v[name] = f32(0.999) * v[name] + f32(1.0 - 0.999) * np.square(g)
    update = m[name] / (np.sqrt(v[name]) + f32(1e-6))
    if optimization.uses_weight_decay(variables[name]):
      update = update + f32(0.01) * params[name]
    params[name] = params[name] - f32(rate) * f32(multipliers.get(name, 1.0)) * update


def test_steps_equal_the_formula_in_float32():
  """The compiled update computes the rule's float32 operations, in the order of a NumPy
  float32 transcription of it (the formula as written before it was compiled): equal
  within float rounding, for decayed and excluded variables and layer-wise rates."""
  rng = np.random.default_rng(1)
  params = {"layer_3/dense/kernel": rng.normal(size=(96, 130)).astype(np.float32),
            "layer_3/dense/bias": rng.normal(size=(130,)).astype(np.float32),
            "embeddings": rng.normal(size=(500, 16)).astype(np.float32)}
  multipliers = {"layer_3/dense/kernel": 0.8 ** 3, "layer_3/dense/bias": 0.8 ** 3}
  variables = {k: tf.Variable(v, name=k) for k, v in params.items()}
  optimizer = optimization.create_optimizer(
      0.01, num_train_steps=10, num_warmup_steps=2, weight_decay_rate=0.01,
      lr_multiplier=lambda var: multipliers.get(var.name[:-2], 1.0))
  # Global norms below 1: nothing is clipped, so the clipping's own rounding stays out.
  grads = [{k: (0.002 * rng.normal(size=v.shape)).astype(np.float32)
            for k, v in params.items()} for _ in range(5)]
  assert all(np.sqrt(sum(np.sum(g.astype(np.float64) ** 2) for g in step.values())) < 1
             for step in grads)

  @tf.function
  def step(step_grads):
    optimizer.apply_gradients([(tf.convert_to_tensor(step_grads[k]), var)
                               for k, var in variables.items()])

  m = {k: np.zeros_like(v) for k, v in params.items()}
  v = {k: np.zeros_like(p) for k, p in params.items()}
  for index, step_grads in enumerate(grads):
    step(step_grads)
    rule_in_float32(params, m, v, step_grads, optimizer.learning_rate_at(index),
                    multipliers, variables)
  for name, var in variables.items():
    for got, want in ((var, params[name]), (optimizer.get_slot(var, "adam_m"), m[name]),
                      (optimizer.get_slot(var, "adam_v"), v[name])):
      # Units in the last place of the array's largest value: where b1 m and
      # (1 - b1) g nearly cancel, one rounding more or less (a fused multiply-add)
      # is many units of the small result, never more than of its operands.
      np.testing.assert_allclose(got.numpy(), want, rtol=0,
                                 atol=4 * np.spacing(np.max(np.abs(want))))


def test_a_hundred_steps_equal_the_rule_in_float32():
  """100 steps with clipping (some steps' norms above 1, most below), layer-wise and
  own-warmup multipliers, decayed and excluded variables and a sparse (embedding)
  gradient with a repeated row: the variables and both moments equal a NumPy float32
  transcription of the rule as Keras' loop applied it before the clipping was folded
  into the update (tf.clip_by_global_norm's factor, then each variable's update) within
  1e-6 of each array's largest value."""
  rng = np.random.default_rng(2)
  shapes = {"layer_2/attention/query/kernel": (16, 2, 8), "layer_2/attention/query/bias":
            (2, 8), "layer_2/output/kernel": (16, 24), "layer_2/output_layer_norm/gamma":
            (24,), "embeddings/word_embeddings": (12, 16)}
  params = {k: rng.normal(size=s).astype(np.float32) for k, s in shapes.items()}
  floats = {"layer_2/attention/query/kernel": 0.8 ** 2, "layer_2/attention/query/bias":
            0.8 ** 2, "layer_2/output/kernel": 0.8 ** 2}
  own = optimization.own_warmup(2.0, 20, 10)  # the embeddings' rate: a schedule
  variables = {k: tf.Variable(v, name=k) for k, v in params.items()}
  optimizer = optimization.create_optimizer(
      3e-3, num_train_steps=100, num_warmup_steps=10, weight_decay_rate=0.01,
      lr_multiplier=lambda var: own if var.name.startswith("embeddings") else
      floats.get(var.name[:-2], 1.0))
  rows = np.array([0, 3, 3, 7, 11])  # the embedding's gradient: row 3 twice
  grads = [{k: ((3.0 if step % 10 == 0 else 0.01) * rng.normal(
      size=(len(rows), 16) if k.startswith("embeddings") else s)).astype(np.float32)
            for k, s in shapes.items()} for step in range(100)]

  @tf.function(autograph=False)
  def step(step_grads):
    optimizer.apply_gradients([
        (tf.IndexedSlices(step_grads[k], rows, shapes[k]) if k.startswith("embeddings")
         else step_grads[k], var) for k, var in variables.items()])

  m = {k: np.zeros_like(v) for k, v in params.items()}
  v = {k: np.zeros_like(p) for k, p in params.items()}
  clipped = 0
  for index, step_grads in enumerate(grads):
    step(step_grads)
    norm = np.float32(np.sqrt(sum(np.sum(np.square(g, dtype=np.float64))
                                  for g in step_grads.values())))
    scale = min(np.float32(1.0) / norm, np.float32(1.0))  # tf.clip_by_global_norm's
    clipped += scale < 1
    dense = {k: g * scale for k, g in step_grads.items()}
    dense["embeddings/word_embeddings"] = np.zeros(shapes["embeddings/word_embeddings"],
                                                   np.float32)
    np.add.at(dense["embeddings/word_embeddings"], rows,
              step_grads["embeddings/word_embeddings"] * scale)
    rule_in_float32(params, m, v, dense, optimizer.learning_rate_at(index),
                    {**floats, "embeddings/word_embeddings": own(index)}, variables)
  assert clipped == 10 and int(optimizer.iterations) == 100
  for name, var in variables.items():
    for got, want in ((var, params[name]), (optimizer.get_slot(var, "adam_m"), m[name]),
                      (optimizer.get_slot(var, "adam_v"), v[name])):
      np.testing.assert_allclose(got.numpy(), want, rtol=0,
                                 atol=1e-6 * np.max(np.abs(want)), err_msg=name)
