"""The pieces every pre-training objective's step is made of, as the original computes
them: the masked-LM and replaced-token losses, the accuracies the log shows, Gumbel-max
sampling, the corruption that writes samples into the input, and a fixed corruption no
model takes part in (for eval). Plain functions of tensors: no model, no config."""

import tensorflow as tf

from data_prep import masking

FIXED_CORRUPTION_RATE = 0.15  # the share of candidate tokens the fixed corruption replaces
DISALLOW_PENALTY = 1000.0  # the original's disallow_correct subtracts this from the logit
GUMBEL_EPSILON = 1e-9  # the original's guard inside both logs of the Gumbel noise
LOSS_EPSILON = 1e-6  # the original's guard in every loss denominator


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


def weighted_mean(values, weights):
  """sum(w * values) / (sum(w) + 1e-6): a logged accuracy, as the original's metrics."""
  weights = tf.cast(weights, tf.float32)
  return tf.reduce_sum(tf.cast(values, tf.float32) * weights) / (
      tf.reduce_sum(weights) + LOSS_EPSILON)


def gumbel_sample(logits, seed, temperature: float = 1.0, disallow_ids=None):
  """Token ids drawn from softmax(logits / temperature) by the Gumbel-max trick, no
  gradient through them; `disallow_ids`' logits drop by 1000 first (disallow_correct)."""
  logits = tf.stop_gradient(tf.cast(logits, tf.float32)) / temperature
  if disallow_ids is not None:
    logits -= DISALLOW_PENALTY * tf.one_hot(disallow_ids, tf.shape(logits)[-1])
  uniform = tf.random.stateless_uniform(tf.shape(logits), seed)
  gumbel = -tf.math.log(-tf.math.log(uniform + GUMBEL_EPSILON) + GUMBEL_EPSILON)
  return tf.argmax(logits + gumbel, -1, output_type=tf.int32)


def corrupt(original_ids, positions, sampled_ids, weights, every_masked_is_fake: bool):
  """(corrupted ids, labels): samples written at the masked positions; labels 1 where
  the token changed (a correct sample counts as real), or for Electric where masked."""
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
