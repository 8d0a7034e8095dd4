"""The pre-training model and its losses (facts section 4), with the original's variants.

One step: mask the batch (dynamic masking, or the record's static masks as they are) ->
generator logits at the masked positions -> masked-LM loss -> Gumbel-max samples
(stop-gradient) written into the unmasked input -> discriminator logits over every token
-> sigmoid loss over real tokens; total = gen_weight * generator loss + disc_weight *
discriminator loss (disc_weight_ramp_steps, new, ramps the latter from 0). Variants,
chosen by the PretrainingConfig as in the original:
- electra_objective and electric_objective both false: BERT-style masked LM only, one
  full-size encoder (no discriminator);
- uniform_generator: the generator's logits are all zero (samples uniform over the vocab);
- untied_generator false: one encoder plays generator and discriminator;
- untied_generator_embeddings: the generator has its own embeddings;
- electric_objective (Electric): a two-tower cloze generator (left-to-right and right-to-
  left encoders whose outputs are shifted by one position and concatenated) gives logits
  at every position, trained on every candidate token; every masked position is labelled
  "replaced", and the discriminator is an energy model: its logits get
  stop_grad(log q(x_t)) + log(mask_prob / (1 - mask_prob)) added.

All randomness is stateless, from the `seed` passed to `compute`, so a resumed run draws
the same masks and samples.
"""

import collections
import math
from typing import Dict, Optional, Tuple

import tensorflow as tf
import tf_keras

from data_prep.records import STATIC_MASK_FEATURES
from data_prep.vocab import load_vocab
from model.config import ModelConfig
from model.electra import ElectraPair
from model.encoder import ElectraEmbeddings, ElectraEncoder
from model.heads import GeneratorHead
from data_prep import masking
from pretrain.config import PretrainingConfig
from util.hparams import HParamsError

SpecialTokens = collections.namedtuple("SpecialTokens", ["cls_id", "sep_id", "mask_id"])
FIXED_CORRUPTION_RATE = 0.15  # the share of candidate tokens the fixed corruption replaces
DISALLOW_PENALTY = 1000.0  # the original's disallow_correct subtracts this from the logit
GUMBEL_EPSILON = 1e-9  # the original's guard inside both logs of the Gumbel noise
LOSS_EPSILON = 1e-6  # the original's guard in every loss denominator


def special_tokens_from_vocab(vocab_file: str) -> SpecialTokens:
  """The ids of [CLS], [SEP] and [MASK] in a (validated) BERT vocab.txt."""
  vocab = load_vocab(vocab_file)
  return SpecialTokens(vocab.cls_id, vocab.sep_id, vocab.mask_id)


def masked_lm_loss(logits, targets, weights):
  """(per-position -log p(target) [...], sum(w * -log p) / (sum(w) + 1e-6))."""
  token_loss = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=tf.cast(targets, tf.int32), logits=tf.cast(logits, tf.float32))
  weights = tf.cast(weights, tf.float32)
  loss = tf.reduce_sum(weights * token_loss) / (tf.reduce_sum(weights) + LOSS_EPSILON)
  return token_loss, loss


def discriminator_loss(logits, labels, input_mask):
  """(per-example mean [B], mean over all real tokens) of the sigmoid cross-entropy."""
  weights = tf.cast(input_mask, tf.float32)
  losses = weights * tf.nn.sigmoid_cross_entropy_with_logits(
      labels=tf.cast(labels, tf.float32), logits=logits)
  example_loss = tf.reduce_sum(losses, -1) / (tf.reduce_sum(weights, -1) + LOSS_EPSILON)
  return example_loss, tf.reduce_sum(losses) / (tf.reduce_sum(weights) + LOSS_EPSILON)


def gumbel_sample(logits, seed, temperature: float = 1.0, disallow_ids=None):
  """Token ids drawn from softmax(logits / temperature) by the Gumbel-max trick.

  With `disallow_ids`, those ids' logits drop by 1000 first (disallow_correct). No
  gradient flows through the samples.
  """
  logits = tf.stop_gradient(tf.cast(logits, tf.float32)) / temperature
  if disallow_ids is not None:
    logits -= DISALLOW_PENALTY * tf.one_hot(disallow_ids, tf.shape(logits)[-1])
  uniform = tf.random.stateless_uniform(tf.shape(logits), seed)
  gumbel = -tf.math.log(-tf.math.log(uniform + GUMBEL_EPSILON) + GUMBEL_EPSILON)
  return tf.argmax(logits + gumbel, -1, output_type=tf.int32)


def corrupt(original_ids, positions, sampled_ids, weights, every_masked_is_fake: bool):
  """(corrupted ids, labels): samples written at the masked positions.

  Labels are 1 where the token differs from the original (a correct sample counts as
  real) or, for Electric, at every masked position.
  """
  corrupted = masking.scatter_tokens(original_ids, positions, sampled_ids, weights)
  if every_masked_is_fake:
    labels = masking.scatter_tokens(tf.zeros_like(original_ids), positions,
                                    tf.ones_like(positions), weights)
  else:
    labels = tf.cast(tf.not_equal(corrupted, original_ids), tf.int32)
  return corrupted, labels


def fixed_corruption(original_ids, input_mask, special_ids, seed,
                     rate: float = FIXED_CORRUPTION_RATE):
  """(corrupted ids, labels, candidates [B, S] bool): a corruption no model takes part in.

  Each candidate (a real token other than [CLS], [SEP], [MASK]) is replaced with
  probability `rate` by the token at a candidate position drawn uniformly from the whole
  batch: a draw from the batch's unigram distribution, so a token's identity alone
  scores an AUC of about 0.5 and only context scores above it. Unlike the generator's
  samples it does not change as the generator learns, so the discriminator's AUC on it
  compares checkpoints and runs. Labels are 1 where the token changed.
  """
  candidates = masking.candidates_mask(original_ids, input_mask, special_ids)
  # A trailing 0 keeps the gather valid for a batch without candidates (nothing chosen).
  pool = tf.concat([tf.boolean_mask(original_ids, candidates), [0]], 0)
  choose_seed, draw_seed = tf.unstack(
      tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), 2))
  shape = tf.shape(original_ids)
  chosen = candidates & (tf.random.stateless_uniform(shape, choose_seed) < rate)
  draws = tf.random.stateless_uniform(shape, draw_seed, minval=0,
                                      maxval=tf.maximum(tf.size(pool) - 1, 1),
                                      dtype=tf.int32)
  corrupted = tf.where(chosen, tf.gather(pool, draws), original_ids)
  return corrupted, tf.cast(tf.not_equal(corrupted, original_ids), tf.int32), candidates


class TwoTowerGenerator(tf_keras.Model):
  """Electric's cloze generator: logits at every position from its two neighbourhoods.

  Position t reads the left-to-right tower's output at t - 1 and the right-to-left
  tower's at t + 1, so it never sees its own token. Like the original, the shift is a
  roll: position 0 reads the ltr output at the last position and the last position the
  rtl output at 0 (both [CLS]/[SEP]/padding, never candidates).
  """

  def __init__(self, config: ModelConfig, embeddings: Optional[ElectraEmbeddings],
               **kwargs):
    kwargs.setdefault("name", "two_tower_generator")
    super().__init__(**kwargs)
    # Without shared embeddings each tower has its own, as the original's scopes.
    self.ltr = ElectraEncoder(config, embeddings=embeddings, attention_direction="ltr",
                              name="generator_ltr")
    self.rtl = ElectraEncoder(config, embeddings=embeddings, attention_direction="rtl",
                              name="generator_rtl")
    self.cloze_head = GeneratorHead(config, name="cloze_predictions")

  def call(self, inputs, training=None):
    ltr = self.ltr(inputs, training=training)
    rtl = self.rtl(inputs, training=training)
    hidden = tf.concat([tf.roll(ltr, 1, axis=1), tf.roll(rtl, -1, axis=1)], -1)
    return self.cloze_head(hidden, self.ltr.embedding_table)


class PretrainingModel(tf_keras.Model):
  """Generator + discriminator (or the MLM-only / Electric variants) and their losses.

  `.electra` is the ElectraPair (discriminator, generator, heads) the checkpoint
  exporters write; Electric's generator is `.two_tower` (its ElectraPair generator and
  generator head stay unused and unbuilt). `special_tokens` defaults to the ids in
  config.vocab_file.
  """

  def __init__(self, config: PretrainingConfig,
               special_tokens: Optional[SpecialTokens] = None, **kwargs):
    kwargs.setdefault("name", "pretraining_model")
    super().__init__(**kwargs)
    self.pretraining_config = config
    self.has_discriminator = config.electra_objective or config.electric_objective
    if config.two_tower_generator and (config.uniform_generator or
                                       not config.untied_generator or
                                       not self.has_discriminator):
      # The original crashes on these combinations (its cloze loss is never built).
      raise HParamsError("two_tower_generator / electric_objective needs "
                         "untied_generator true, uniform_generator false and "
                         "electra_objective or electric_objective")
    self.special_tokens = special_tokens or special_tokens_from_vocab(config.vocab_file)
    self.model_config = config.model_config()
    self.electra = ElectraPair(self.model_config)
    self.two_tower = None
    if config.two_tower_generator:
      shared = (None if config.untied_generator_embeddings
                else self.electra.discriminator.embeddings)
      self.two_tower = TwoTowerGenerator(self.model_config.generator_config(), shared)

  @staticmethod
  def _static_masks(batch: Dict[str, tf.Tensor]) -> Optional[masking.MaskedInputs]:
    """The record's own masks (static masking), or None."""
    if not all(key in batch for key in STATIC_MASK_FEATURES):
      return None
    return masking.MaskedInputs(tf.cast(batch["input_ids"], tf.int32),
                                tf.cast(batch["masked_lm_positions"], tf.int32),
                                tf.cast(batch["masked_lm_ids"], tf.int32),
                                tf.cast(batch["masked_lm_weights"], tf.float32))

  @classmethod
  def original_ids(cls, batch: Dict[str, tf.Tensor]) -> tf.Tensor:
    """The batch's tokens before any masking (static masks written back)."""
    static = cls._static_masks(batch)
    if static is None:
      return tf.cast(batch["input_ids"], tf.int32)
    return masking.scatter_tokens(static.input_ids, static.masked_lm_positions,
                                  static.masked_lm_ids, static.masked_lm_weights)

  def mask(self, batch: Dict[str, tf.Tensor], seed) -> Tuple[tf.Tensor,
                                                              masking.MaskedInputs]:
    """(original ids, masked inputs); static masks in `batch` are used as they are."""
    static = self._static_masks(batch)
    if static is not None:
      return self.original_ids(batch), static
    input_ids = tf.cast(batch["input_ids"], tf.int32)
    return input_ids, masking.mask_inputs(
        input_ids, batch["input_mask"], mask_prob=self.pretraining_config.mask_prob,
        max_predictions=self.pretraining_config.max_predictions_per_seq,
        mask_id=self.special_tokens.mask_id, special_ids=self.special_tokens, seed=seed)

  def discriminator_variables(self):
    """Every variable the discriminator reads: its encoder (the embeddings it shares
    with the generator included) and its head."""
    return list(self.electra.discriminator.trainable_variables) + list(
        self.electra.discriminator_head.trainable_variables)

  def disc_weight(self, step=None) -> tf.Tensor:
    """The discriminator loss's weight at training step `step` (the full weight when
    None, as in evaluation)."""
    config = self.pretraining_config
    if step is None or not config.disc_weight_ramp_steps:
      return tf.constant(config.disc_weight, tf.float32)
    ramp = tf.cast(step, tf.float32) / config.disc_weight_ramp_steps
    return config.disc_weight * tf.minimum(ramp, 1.0)

  def compute(self, batch: Dict[str, tf.Tensor], seed, training: bool, step=None
              ) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
    """(total loss, outputs) for one per-replica batch; `seed` is an int [2] tensor and
    `step` the training step (for disc_weight_ramp_steps).

    Replicas need different seeds (training.runtime.stateless_seed folds in the replica
    id). The loss is this replica's mean; outputs hold the scalars "mlm_loss" (masked
    positions), "cloze_loss" (two-tower generators) and "disc_loss", and the tensors
    PretrainingMetrics reads.
    """
    config = self.pretraining_config
    mask_seed, sample_seed = tf.unstack(
        tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), 2))

    original_ids, masked = self.mask(batch, mask_seed)
    input_mask = tf.cast(batch["input_mask"], tf.int32)
    segment_ids = tf.cast(batch["segment_ids"], tf.int32)

    def encoder_inputs(ids):
      return {"input_ids": ids, "input_mask": input_mask, "segment_ids": segment_ids}

    # Generator.
    outputs = {}
    cloze_logits = None
    if config.uniform_generator:
      mlm_logits = tf.zeros(tf.concat([tf.shape(masked.masked_lm_ids),
                                       [self.model_config.vocab_size]], 0))
    elif self.two_tower is not None:
      # The cloze model reads the unmasked input and predicts every position.
      cloze_logits = self.two_tower(encoder_inputs(original_ids), training=training)
      mlm_logits = tf.gather(cloze_logits, masked.masked_lm_positions, batch_dims=1)
      candidates = masking.candidates_mask(original_ids, input_mask,
                                           self.special_tokens)
      _, outputs["cloze_loss"] = masked_lm_loss(cloze_logits, original_ids, candidates)
    else:
      mlm_logits = self.electra.generator_logits(
          encoder_inputs(masked.input_ids), training=training,
          positions=masked.masked_lm_positions)
    token_loss, outputs["mlm_loss"] = masked_lm_loss(mlm_logits, masked.masked_lm_ids,
                                                     masked.masked_lm_weights)
    total_loss = config.gen_weight * outputs.get("cloze_loss", outputs["mlm_loss"])
    outputs.update({
        "input_ids": masked.input_ids,
        "input_mask": input_mask,
        "masked_lm_positions": masked.masked_lm_positions,
        "masked_lm_ids": masked.masked_lm_ids,
        "masked_lm_weights": masked.masked_lm_weights,
        "masked_lm_preds": tf.argmax(mlm_logits, -1, output_type=tf.int32),
        "masked_lm_token_loss": token_loss,
    })
    if not self.has_discriminator:
      return total_loss, outputs

    # Sampling and the corrupted input.
    sampled = gumbel_sample(
        mlm_logits, sample_seed, config.temperature,
        disallow_ids=masked.masked_lm_ids if config.disallow_correct else None)
    corrupted, labels = corrupt(original_ids, masked.masked_lm_positions, sampled,
                                masked.masked_lm_weights,
                                every_masked_is_fake=config.electric_objective)

    # Discriminator.
    disc_logits = self.electra.discriminator_logits(encoder_inputs(corrupted),
                                                    training=training)
    if config.electric_objective:
      log_q = (tf.gather(cloze_logits, corrupted, batch_dims=2) -
               tf.reduce_logsumexp(cloze_logits, -1))
      disc_logits += tf.stop_gradient(log_q) + math.log(
          config.mask_prob / (1 - config.mask_prob))
    example_loss, outputs["disc_loss"] = discriminator_loss(disc_logits, labels,
                                                            input_mask)
    total_loss += self.disc_weight(step) * outputs["disc_loss"]
    outputs.update({
        "sampled_ids": sampled,
        "corrupted_ids": corrupted,
        "disc_logits": disc_logits,
        "disc_probs": tf.sigmoid(disc_logits),
        "disc_preds": tf.cast(disc_logits > 0, tf.int32),
        "disc_labels": labels,
        "disc_example_loss": example_loss,
    })
    return total_loss, outputs

  def fixed_corruption_outputs(self, batch: Dict[str, tf.Tensor], seed
                               ) -> Dict[str, tf.Tensor]:
    """The discriminator on `fixed_corruption` of the batch (`seed` fixed per batch, not
    per run): "fixed_logits", "fixed_labels" and "fixed_weights" (the candidates) [B, S],
    and for how alike its token states are, "state_sum" [H] (the sum of the candidates'
    unit-length final states) and "state_count"."""
    input_mask = tf.cast(batch["input_mask"], tf.int32)
    corrupted, labels, candidates = fixed_corruption(
        self.original_ids(batch), input_mask, self.special_tokens, seed)
    inputs = {"input_ids": corrupted, "input_mask": input_mask,
              "segment_ids": tf.cast(batch["segment_ids"], tf.int32)}
    hidden = self.electra.discriminator(inputs, training=False)
    logits = self.electra.discriminator_logits(inputs, hidden=hidden)
    states = tf.boolean_mask(tf.math.l2_normalize(tf.cast(hidden, tf.float32), -1),
                             candidates)
    return {"fixed_logits": tf.cast(logits, tf.float32), "fixed_labels": labels,
            "fixed_weights": tf.cast(candidates, tf.float32),
            "state_sum": tf.reduce_sum(states, 0),
            "state_count": tf.shape(states)[0]}

  def build_variables(self, seq_length: int = 8):
    """Creates every variable the objective uses by running one tiny batch."""
    self.compute(self.electra.dummy_inputs(1, seq_length), tf.constant([0, 0]),
                 training=False)
    return self
