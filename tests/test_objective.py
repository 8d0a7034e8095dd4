"""pretrain/objectives/ and pretrain/model.py: losses against NumPy, sampling
statistics, labels, masking statistics, every variant on a tiny model, where gradients
flow, and each objective's step against the same step composed here by hand."""

import math

import numpy as np
import pytest
import tensorflow as tf
from scipy.special import log_softmax, softmax

from data_prep import masking
from data_prep.vocab import VocabError
from pretrain import eval_metrics
from pretrain.objectives import Electra, Electric, MaskedLM, losses, objective_for
from pretrain.objectives.masked_lm import mask_batch
from pretrain.eval_metrics import DISC_METRICS, MLM_METRICS, PretrainingMetrics
from pretrain.model import PretrainingModel, SpecialTokens
from tests.helpers import SPECIAL, VOCAB, make_batch, tiny_config


def run_step(model, batch, seed, training, step=None):
  """The step of the objective `model`'s config names, over its networks."""
  return objective_for(model.pretraining_config).compute(model, batch, seed, training,
                                                         step)


def test_losses_match_numpy():
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(3, 5, 7)).astype(np.float32) * 3
  targets = rng.integers(0, 7, (3, 5))
  weights = (rng.random((3, 5)) < 0.6).astype(np.float32)
  token_loss, loss = losses.masked_lm_loss(logits, targets, weights)
  nll = -np.take_along_axis(log_softmax(logits.astype(np.float64), -1),
                            targets[..., None], -1)[..., 0]
  np.testing.assert_allclose(token_loss.numpy(), nll, rtol=1e-5)
  np.testing.assert_allclose(float(loss), np.sum(weights * nll) / (weights.sum() + 1e-6),
                             rtol=1e-5)

  disc_logits = rng.normal(size=(3, 6)).astype(np.float32) * 4
  labels = rng.integers(0, 2, (3, 6))
  input_mask = (np.arange(6)[None] < np.array([[6], [4], [1]])).astype(np.int32)
  example_loss, loss = losses.discriminator_loss(disc_logits, labels, input_mask)
  x = disc_logits.astype(np.float64)
  p = 1 / (1 + np.exp(-x))
  ce = -(labels * np.log(p) + (1 - labels) * np.log(1 - p)) * input_mask
  np.testing.assert_allclose(example_loss.numpy(),
                             ce.sum(-1) / (input_mask.sum(-1) + 1e-6), rtol=1e-5)
  np.testing.assert_allclose(float(loss), ce.sum() / (input_mask.sum() + 1e-6),
                             rtol=1e-5)


@pytest.mark.parametrize("temperature", [1.0, 2.0])
def test_gumbel_sampling_follows_softmax(temperature):
  logits = np.array([2.0, 1.0, 0.0, -1.0, 0.5], np.float32)
  draws = 40000
  samples = losses.gumbel_sample(np.tile(logits, (draws, 1)), [3, 4],
                                    temperature=temperature).numpy()
  frequencies = np.bincount(samples, minlength=5) / draws
  # Standard error <= 0.0025 per class; 0.012 is about 5 of them.
  np.testing.assert_allclose(frequencies, softmax(logits / temperature), atol=0.012)


def test_disallow_correct_never_samples_the_original():
  logits = np.tile(np.array([4.0, 0.0, 0.0, 1.0], np.float32), (20000, 1))
  correct = np.zeros(20000, np.int32)  # the likeliest token is the correct one
  samples = losses.gumbel_sample(logits, [1, 2], disallow_ids=correct).numpy()
  assert not np.any(samples == 0)
  frequencies = np.bincount(samples, minlength=4)[1:] / 20000
  np.testing.assert_allclose(frequencies, softmax(logits[0, 1:]), atol=0.015)


def test_corrupt_labels():
  original = tf.constant([[2, 10, 11, 12, 3, 0]])
  positions = tf.constant([[1, 2, 3, 0]])
  sampled = tf.constant([[10, 20, 21, 30]])  # slot 0 samples the original token
  weights = tf.constant([[1.0, 1.0, 0.0, 0.0]])  # slots 2, 3 unused
  corrupted, labels = losses.corrupt(original, positions, sampled, weights, False)
  np.testing.assert_array_equal(corrupted.numpy(), [[2, 10, 20, 12, 3, 0]])
  np.testing.assert_array_equal(labels.numpy(), [[0, 0, 1, 0, 0, 0]])
  _, electric_labels = losses.corrupt(original, positions, sampled, weights, True)
  np.testing.assert_array_equal(electric_labels.numpy(), [[0, 1, 1, 0, 0, 0]])
  # A position drawn twice takes its first slot's sample, whatever the device.
  corrupted, labels = losses.corrupt(original, tf.constant([[2, 2, 3, 0]]),
                                        sampled, tf.constant([[1.0, 1.0, 1.0, 0.0]]),
                                        False)
  np.testing.assert_array_equal(corrupted.numpy(), [[2, 10, 10, 21, 3, 0]])
  np.testing.assert_array_equal(labels.numpy(), [[0, 0, 1, 1, 0, 0]])


def test_masking_statistics():
  config = tiny_config(max_seq_length=128)
  model = PretrainingModel(config, SPECIAL)
  n = config.max_predictions_per_seq
  assert n == 19
  rng = np.random.default_rng(1)
  chosen = real = masked = 0
  for step in range(20):
    batch = make_batch(rng, batch=16, seq=128, min_length=20)
    original, out = mask_batch(batch, config, SPECIAL, tf.constant([step, 7]))
    ids = batch["input_ids"].numpy()
    mask = batch["input_mask"].numpy()
    positions = out.masked_lm_positions.numpy()
    weights = out.masked_lm_weights.numpy()
    masked_ids = out.input_ids.numpy()
    np.testing.assert_array_equal(original.numpy(), ids)
    assert positions.shape == (16, n)
    for row in range(16):
      used = positions[row][weights[row] > 0]
      assert len(used) == max(1, min(n, round(mask[row].sum() * config.mask_prob)))
      picked = ids[row, used]
      assert np.all(mask[row, used] == 1)
      assert not np.any(np.isin(picked, [0, SPECIAL.cls_id, SPECIAL.sep_id]))
      np.testing.assert_array_equal(out.masked_lm_ids.numpy()[row][weights[row] > 0],
                                    picked)
      untouched = np.ones(128, bool)
      untouched[used] = False
      np.testing.assert_array_equal(masked_ids[row, untouched], ids[row, untouched])
      masked += np.sum(masked_ids[row, used] == SPECIAL.mask_id)
      chosen += len(used)
      real += mask[row].sum()
  # num_to_predict is 15% of the real tokens ([CLS]/[SEP] included), as the original.
  assert abs(chosen / real - 0.15) < 0.01
  assert abs(masked / chosen - 0.85) < 0.025


def test_static_masks_are_used_as_they_are():
  model = PretrainingModel(tiny_config(), SPECIAL)
  batch = make_batch(np.random.default_rng(2), batch=2)
  original_ids = batch["input_ids"].numpy()
  masked_ids = original_ids.copy()
  masked_ids[:, 1] = SPECIAL.mask_id
  batch.update(input_ids=tf.constant(masked_ids),
               masked_lm_positions=tf.constant([[1, 2], [1, 0]], tf.int64),
               masked_lm_ids=tf.constant(
                   [original_ids[0, [1, 2]], [original_ids[1, 1], 0]], tf.int64),
               masked_lm_weights=tf.constant([[1.0, 1.0], [1.0, 0.0]]))
  loss, outputs = run_step(model, batch, tf.constant([0, 1]), training=False)
  assert np.isfinite(float(loss))
  np.testing.assert_array_equal(outputs["input_ids"].numpy(), masked_ids)
  np.testing.assert_array_equal(outputs["masked_lm_positions"].numpy(), [[1, 2], [1, 0]])
  # The discriminator sees the original tokens everywhere except at sampled slots.
  corrupted = outputs["corrupted_ids"].numpy()
  keep = np.ones_like(corrupted, bool)
  keep[0, [1, 2]] = keep[1, 1] = False
  np.testing.assert_array_equal(corrupted[keep], original_ids[keep])


VARIANTS = {
    "electra": {},
    "mlm_only": {"electra_objective": False},
    "uniform_generator": {"uniform_generator": True},
    "tied_generator": {"untied_generator": False},
    "untied_embeddings": {"untied_generator_embeddings": True},
    "electric": {"electric_objective": True},
    "disallow_correct_temperature": {"disallow_correct": True, "temperature": 0.5},
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_variant_builds_and_gives_finite_loss(variant):
  config = tiny_config(**VARIANTS[variant])
  model = PretrainingModel(config, SPECIAL)
  batch = make_batch(np.random.default_rng(3))
  loss, outputs = run_step(model, batch, tf.constant([5, 6]), training=True)
  assert np.isfinite(float(loss))
  has_disc = variant != "mlm_only"
  assert ("disc_loss" in outputs) == has_disc
  expected = config.gen_weight * float(outputs.get("cloze_loss", outputs["mlm_loss"]))
  if has_disc:
    expected += config.disc_weight * float(outputs["disc_loss"])
  assert float(loss) == pytest.approx(expected, rel=1e-5)
  metrics = PretrainingMetrics()
  metrics.update(outputs)
  assert set(metrics.result()) == set(MLM_METRICS + (DISC_METRICS if has_disc else ()))

  electra = model.electra
  gen_table = electra.generator.embedding_table
  if variant in ("mlm_only", "tied_generator"):
    assert electra.generator is electra.discriminator
  elif variant == "electric":
    assert model.two_tower.ltr.embedding_table is electra.discriminator.embedding_table
    # ElectraPair's own generator and its head stay unused (unbuilt).
    assert not electra.generator.transformer_layers[0].weights
    assert not electra.generator_head.weights
  elif variant == "untied_embeddings":
    assert gen_table is not electra.discriminator.embedding_table
    assert gen_table.shape[-1] == 16  # the generator's hidden size
  elif variant == "uniform_generator":
    assert not electra.generator.transformer_layers[0].weights
    np.testing.assert_allclose(float(outputs["mlm_loss"]), math.log(VOCAB), rtol=1e-5)
  else:
    assert gen_table is electra.discriminator.embedding_table
  if variant == "disallow_correct_temperature":
    weights = outputs["masked_lm_weights"].numpy() > 0
    assert not np.any(outputs["sampled_ids"].numpy()[weights] ==
                      outputs["masked_lm_ids"].numpy()[weights])
  if has_disc:
    labels = outputs["disc_labels"].numpy()
    differs = outputs["corrupted_ids"].numpy() != batch["input_ids"].numpy()
    if variant == "electric":
      assert np.all(labels[differs] == 1)
    else:
      np.testing.assert_array_equal(labels, differs.astype(np.int32))


def test_electric_energy_logits_and_cloze_context():
  config = tiny_config(electric_objective=True, mask_prob=0.25)
  model = PretrainingModel(config, SPECIAL)
  batch = make_batch(np.random.default_rng(4), batch=2)
  _, outputs = run_step(model, batch, tf.constant([1, 1]), training=False)
  corrupted = outputs["corrupted_ids"]
  inputs = dict(batch)
  cloze = model.two_tower(inputs, training=False).numpy()
  log_q = np.take_along_axis(log_softmax(cloze.astype(np.float64), -1),
                             corrupted.numpy()[..., None], -1)[..., 0]
  plain = model.electra.discriminator_logits(dict(batch, input_ids=corrupted),
                                             training=False).numpy()
  np.testing.assert_allclose(outputs["disc_logits"].numpy(),
                             plain + log_q + math.log(0.25 / 0.75), rtol=1e-4, atol=1e-4)
  # Each inner position's cloze prediction ignores its own token.
  changed = batch["input_ids"].numpy().copy()
  changed[:, 5] = (changed[:, 5] + 1) % VOCAB
  cloze_changed = model.two_tower(dict(batch, input_ids=tf.constant(changed)),
                                  training=False).numpy()
  np.testing.assert_allclose(cloze_changed[:, 5], cloze[:, 5], rtol=1e-5, atol=1e-5)
  assert not np.allclose(cloze_changed[:, 4], cloze[:, 4], atol=1e-5)


def test_gradients_reach_both_networks_but_not_through_samples():
  model = PretrainingModel(tiny_config(), SPECIAL)
  batch = make_batch(np.random.default_rng(5))
  model.build_variables()
  shared = {v.ref() for v in model.electra.discriminator.embeddings.weights}
  generator_only = [v for v in model.electra.generator.trainable_variables +
                    model.electra.generator_head.trainable_variables
                    if v.ref() not in shared]
  discriminator = model.electra.discriminator
  discriminator_only = (model.electra.discriminator_head.trainable_variables +
                        discriminator.transformer_layers[0].trainable_variables)

  # Eagerly: the tape records the same connections as a traced step, without tracing.
  with tf.GradientTape(persistent=True) as tape:
    loss, outputs = run_step(model, batch, tf.constant([8, 9]), training=True)
  total = tape.gradient(loss, generator_only + discriminator_only)
  disc_to_gen = tape.gradient(outputs["disc_loss"], generator_only)
  mlm_to_disc = tape.gradient(outputs["mlm_loss"], discriminator_only)
  assert all(g is not None and float(tf.norm(tf.convert_to_tensor(g))) > 0
             for g in total)
  assert all(g is None for g in disc_to_gen)
  assert all(g is None for g in mlm_to_disc)


def test_same_seed_same_outputs():
  model = PretrainingModel(tiny_config(), SPECIAL)
  batch = make_batch(np.random.default_rng(6))
  first = run_step(model, batch, tf.constant([3, 4]), training=False)[1]
  again = run_step(model, batch, tf.constant([3, 4]), training=False)[1]
  other = run_step(model, batch, tf.constant([3, 5]), training=False)[1]
  for key in ("masked_lm_positions", "sampled_ids", "disc_logits"):
    np.testing.assert_array_equal(first[key].numpy(), again[key].numpy())
  assert not np.array_equal(first["masked_lm_positions"].numpy(),
                            other["masked_lm_positions"].numpy())


def test_missing_vocab_and_bad_variant_are_clear_errors(tmp_path):
  with pytest.raises(VocabError, match="does not exist"):
    PretrainingModel(tiny_config(vocab_file=str(tmp_path / "none.txt")))
  vocab = tmp_path / "vocab.txt"
  vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n")
  with pytest.raises(VocabError, match=r"missing \[MASK\]"):
    PretrainingModel(tiny_config(vocab_file=str(vocab), vocab_size=5))
  vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n")
  assert PretrainingModel(tiny_config(vocab_file=str(vocab), vocab_size=6)
                          ).special_tokens == SpecialTokens(2, 3, 4)


def test_fixed_corruption_draws_from_the_batch_unigram_and_is_fixed():
  rng = np.random.default_rng(5)
  batch = make_batch(rng, batch=128, seq=128, min_length=64)
  # Zipf-distributed tokens over a 4,000-token vocabulary, as text's (the most frequent
  # ~10%), so that identity would tell if the draws were skewed.
  ids = batch["input_ids"].numpy()
  body = ids >= 5
  ranks = np.arange(1, 4001)
  ids[body] = 5 + rng.choice(4000, body.sum(), p=(1 / ranks) / (1 / ranks).sum())
  original, input_mask = tf.constant(ids), batch["input_mask"]
  seed = tf.constant([7, 9], tf.int64)
  corrupted, labels, candidates = (
      t.numpy() for t in losses.fixed_corruption(original, input_mask, SPECIAL, seed))
  again = losses.fixed_corruption(original, input_mask, SPECIAL, seed)[0].numpy()
  other = losses.fixed_corruption(original, input_mask, SPECIAL,
                                     tf.constant([7, 10], tf.int64))[0].numpy()
  np.testing.assert_array_equal(corrupted, again)  # a function of the seed alone
  assert (corrupted != other).any()
  np.testing.assert_array_equal(candidates, body & (batch["input_mask"].numpy() > 0))
  np.testing.assert_array_equal(corrupted[~candidates], ids[~candidates])
  np.testing.assert_array_equal(labels, (corrupted != ids).astype(np.int32))
  assert set(corrupted[labels > 0]) <= set(ids[candidates])
  assert 0.13 < labels.sum() / candidates.sum() < 0.15  # 15%, less the draws that match
  # A score from the token's identity alone (its frequency) tells (almost) nothing.
  frequency = np.bincount(ids[candidates], minlength=4005)
  auc = eval_metrics.roc_auc(labels[candidates], frequency[corrupted[candidates]])
  assert abs(auc - 0.5) < 0.02


def test_fixed_corruption_does_not_depend_on_the_model():
  rng = np.random.default_rng(6)
  batch = make_batch(rng)
  seed = tf.constant([1, 2], tf.int64)
  outputs = []
  for config_seed in (0, 1):
    tf.keras.utils.set_random_seed(config_seed)
    model = PretrainingModel(tiny_config(seed=config_seed),
                             special_tokens=SPECIAL).build_variables(16)
    outputs.append({k: v.numpy() for k, v in
                    objective_for(model.pretraining_config).eval_outputs(
                        model, batch, seed).items()})
  np.testing.assert_array_equal(outputs[0]["fixed_labels"], outputs[1]["fixed_labels"])
  np.testing.assert_array_equal(outputs[0]["fixed_weights"], outputs[1]["fixed_weights"])
  assert not np.allclose(outputs[0]["fixed_logits"], outputs[1]["fixed_logits"])
  assert outputs[0]["state_count"] == outputs[0]["fixed_weights"].sum()
  assert outputs[0]["state_sum"].shape == (32,)


def test_disc_weight_ramp():
  """disc_weight_ramp_steps: total = gen_weight * mlm + disc_weight * min(step / ramp, 1)
  * disc; without a step (evaluation) or without a ramp the original's constant."""
  batch = make_batch(np.random.default_rng(8))
  seed = tf.constant([3, 4])
  model = PretrainingModel(tiny_config(disc_weight_ramp_steps=100), SPECIAL)
  for step, share in ((0, 0.0), (25, 0.25), (100, 1.0), (400, 1.0), (None, 1.0)):
    loss, outputs = run_step(model, batch, seed, training=False, step=step)
    expected = float(outputs["mlm_loss"]) + 50.0 * share * float(outputs["disc_loss"])
    assert float(loss) == pytest.approx(expected, rel=1e-5)
  constant = PretrainingModel(tiny_config(), SPECIAL)
  assert float(objective_for(constant.pretraining_config).disc_weight(
      tf.constant(0))) == 50.0


def test_the_config_switches_choose_one_objective_class():
  cases = [({}, Electra, "pair"), ({"electra_objective": False}, MaskedLM, "generator"),
           ({"electric_objective": True}, Electric, "discriminator"),
           ({"electric_objective": True, "electra_objective": False}, Electric,
            "discriminator"),
           ({"two_tower_generator": True}, Electra, "discriminator")]
  for overrides, kind, part in cases:
    chosen = objective_for(tiny_config(**overrides))
    assert type(chosen) is kind and chosen.exported_part == part, overrides
    model = PretrainingModel(tiny_config(**overrides), SPECIAL).build_variables()
    # disc_lr_multiplier scales exactly the variables the discriminator reads.
    scaled = {v.ref() for v in chosen.discriminator_variables(model)}
    reads = {v.ref() for v in model.electra.discriminator.trainable_variables +
             model.electra.discriminator_head.trainable_variables}
    assert scaled == (reads if chosen.has_discriminator else set()), overrides


# Each objective's outputs on one fixed batch, seed and weights (NumPy's, seed 0), as the
# code computed them when the original's switches chose the objective (before
# `objective` and the classes' logged losses): naming changed, numbers must not.
BEFORE_THE_CHOICE = {
    "masked_lm": {"loss": 3.8908069133758545, "mlm_loss": 3.8908069133758545,
                  "masked_lm_preds": 384, "masked_lm_ids": 249},
    "electra": {"loss": 40.56724166870117, "mlm_loss": 3.882639169692993,
                "disc_loss": 0.7336920499801636, "masked_lm_preds": 328, "disc_preds": 64,
                "masked_lm_ids": 249},
    "electric": {"loss": 41.395484924316406, "mlm_loss": 3.9865612983703613,
                 "cloze_loss": 3.9040069580078125, "disc_loss": 0.7498295307159424,
                 "masked_lm_preds": 232, "disc_preds": 0, "masked_lm_ids": 249},
}


@pytest.mark.parametrize("objective", sorted(BEFORE_THE_CHOICE))
def test_each_objective_computes_what_it_did_before_objective_was_one_field(objective):
  model = PretrainingModel(tiny_config(objective=objective), SPECIAL)
  assert objective_for(model.pretraining_config).name == objective
  model.build_variables(16)
  rng = np.random.default_rng(0)
  for variable in model.weights:  # the same values whatever ran before in the process
    variable.assign(rng.normal(0, 0.1, variable.shape).astype(
        variable.dtype.as_numpy_dtype))
  loss, outputs = run_step(model, make_batch(np.random.default_rng(3)),
                           tf.constant([5, 6]), training=False)
  logged = [name for name in objective_for(model.pretraining_config).logged(outputs)
            if name.endswith("_loss")]
  got = {"loss": float(loss), **{name: float(outputs[name]) for name in logged},
         **{name: int(tf.reduce_sum(tf.cast(outputs[name], tf.int64))) for name in
            ("masked_lm_preds", "disc_preds", "masked_lm_ids") if name in outputs}}
  expected = BEFORE_THE_CHOICE[objective]
  assert set(got) == set(expected)  # the logged losses are the ones it computes
  assert got == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("objective", ["masked_lm", "electra", "electric"])
def test_each_step_equals_its_pieces_composed_by_hand(objective):
  """One step of the objective against the same step written out here from the
  networks, the masking rules and NumPy: masks, samples, corruption, logits, every
  loss, the total at a ramped disc_weight and the scalars the log shows."""
  config = tiny_config(objective=objective, temperature=0.7, disc_weight_ramp_steps=10)
  model = PretrainingModel(config, SPECIAL).build_variables(16)
  batch = make_batch(np.random.default_rng(9))
  seed = tf.constant([11, 12])
  chosen = objective_for(config)
  loss, outputs = chosen.compute(model, batch, seed, training=False, step=tf.constant(4))

  mask_seed, sample_seed = tf.unstack(
      tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), 2))
  masked = masking.mask_inputs(
      batch["input_ids"], batch["input_mask"], mask_prob=config.mask_prob,
      max_predictions=config.max_predictions_per_seq, mask_id=SPECIAL.mask_id,
      special_ids=SPECIAL, seed=mask_seed)
  ids, input_mask = batch["input_ids"].numpy(), batch["input_mask"].numpy()
  positions, targets, weights = (t.numpy() for t in masked[1:])
  rows = np.arange(len(ids))[:, None]

  def inputs(token_ids):
    return {"input_ids": tf.constant(token_ids), "input_mask": batch["input_mask"],
            "segment_ids": batch["segment_ids"]}

  electra = model.electra
  if objective == "electric":  # the cloze model reads the unmasked tokens
    cloze = model.two_tower(inputs(ids), training=False).numpy()
    mlm_logits = cloze[rows, positions]
  else:
    hidden = tf.gather(electra.generator(inputs(masked.input_ids.numpy()),
                                         training=False), positions, batch_dims=1)
    mlm_logits = electra.generator_head(hidden, electra.generator.embedding_table).numpy()
  token_loss = -np.take_along_axis(log_softmax(mlm_logits.astype(np.float64), -1),
                                   targets[..., None], -1)[..., 0]
  mlm_loss = (weights * token_loss).sum() / (weights.sum() + 1e-6)
  accuracy = ((mlm_logits.argmax(-1) == targets) * weights).sum() / (weights.sum() + 1e-6)
  expected = {"mlm_loss": mlm_loss, "masked_lm_accuracy": accuracy}
  np.testing.assert_array_equal(outputs["input_ids"].numpy(), masked.input_ids.numpy())
  np.testing.assert_array_equal(outputs["masked_lm_positions"].numpy(), positions)
  generator_loss = mlm_loss
  if objective == "electric":  # trained on every candidate token
    candidates = (input_mask > 0) & ~np.isin(ids, list(SPECIAL))
    log_q = log_softmax(cloze.astype(np.float64), -1)
    cloze_nll = -np.take_along_axis(log_q, ids[..., None], -1)[..., 0]
    generator_loss = expected["cloze_loss"] = (candidates * cloze_nll).sum() / (
        candidates.sum() + 1e-6)
  want_loss = config.gen_weight * generator_loss
  if objective != "masked_lm":
    uniform = tf.random.stateless_uniform(mlm_logits.shape, sample_seed).numpy()
    gumbel = -np.log(-np.log(uniform.astype(np.float64) + 1e-9) + 1e-9)
    sampled = np.argmax(mlm_logits / config.temperature + gumbel, -1)
    np.testing.assert_array_equal(outputs["sampled_ids"].numpy(), sampled)
    corrupted, written = ids.copy(), np.zeros_like(ids)
    for row in range(len(ids)):
      for slot in reversed(range(positions.shape[1])):  # a position's first slot wins
        if weights[row, slot] > 0:
          corrupted[row, positions[row, slot]] = sampled[row, slot]
          written[row, positions[row, slot]] = 1
    labels = written if objective == "electric" else (corrupted != ids).astype(np.int32)
    np.testing.assert_array_equal(outputs["corrupted_ids"].numpy(), corrupted)
    np.testing.assert_array_equal(outputs["disc_labels"].numpy(), labels)
    logits = electra.discriminator_head(electra.discriminator(
        inputs(corrupted), training=False)).numpy().astype(np.float64)
    if objective == "electric":  # the energy correction
      logits += np.take_along_axis(log_q, corrupted[..., None], -1)[..., 0] + math.log(
          config.mask_prob / (1 - config.mask_prob))
    np.testing.assert_allclose(outputs["disc_logits"].numpy(), logits, rtol=1e-5,
                               atol=1e-5)
    cross_entropy = (np.maximum(logits, 0) - logits * labels +
                     np.log1p(np.exp(-np.abs(logits)))) * input_mask
    expected["disc_loss"] = cross_entropy.sum() / (input_mask.sum() + 1e-6)
    expected["disc_accuracy"] = (((logits > 0) == labels) * input_mask).sum() / (
        input_mask.sum() + 1e-6)
    want_loss += config.disc_weight * 0.4 * expected["disc_loss"]  # step 4 of 10
  assert float(loss) == pytest.approx(want_loss, rel=1e-5)
  logged = {name: float(value) for name, value in chosen.logged(outputs).items()}
  assert logged == pytest.approx(expected, rel=1e-5)
