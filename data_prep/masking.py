"""Dynamic masking, as the original's `pretrain_helpers.mask`.

Positions are drawn *with replacement* from the candidates (the original samples them
with tf.random.categorical), so a sequence can hold the same position twice; slots past
num_to_predict have weight 0 and position 0 ([CLS], never a candidate). Chosen positions
become [MASK] 85% of the time and keep their token otherwise; there is no random-token
replacement. All randomness is stateless, from `seed`, so a seed fixes the result.
"""

import collections

import tensorflow as tf


MaskedInputs = collections.namedtuple(
    "MaskedInputs", ["input_ids", "masked_lm_positions", "masked_lm_ids",
                     "masked_lm_weights"])


def candidates_mask(input_ids, input_mask, special_ids):
  """True where a token may be masked: real tokens other than the special ones."""
  mask = tf.cast(input_mask, tf.bool)
  for special in special_ids:
    mask &= tf.not_equal(input_ids, special)
  return mask


def scatter_tokens(input_ids, positions, tokens, weights):
  """input_ids with `tokens` written at `positions` where weights > 0. Where a position
  appears in two written slots, the first's token is written: scatter order for
  duplicate indices is unspecified (it can vary on GPU), so duplicates are dropped (the
  original averaged the two token ids, an artifact we do not keep)."""
  batch = tf.shape(input_ids)[0]
  n = tf.shape(positions)[1]
  active = weights > 0
  same = tf.equal(positions[:, :, None], positions[:, None, :]) & active[:, None, :]
  earlier = tf.linalg.band_part(tf.ones([n, n], tf.bool), -1, 0) & ~tf.eye(n,
                                                                            dtype=tf.bool)
  repeated = tf.reduce_any(same & earlier[None], -1)  # an earlier active slot, same spot
  keep = tf.reshape(active & ~repeated, [-1])
  rows = tf.tile(tf.range(batch)[:, None], [1, n])
  indices = tf.boolean_mask(tf.reshape(tf.stack([rows, positions], -1), [-1, 2]), keep)
  updates = tf.boolean_mask(tf.reshape(tokens, [-1]), keep)
  return tf.tensor_scatter_nd_update(input_ids, indices, tf.cast(updates, input_ids.dtype))


def mask_inputs(input_ids, input_mask, *, mask_prob: float, max_predictions: int,
                mask_id: int, special_ids, seed) -> MaskedInputs:
  """Masks a batch [B, L] of int32 ids; `seed` is an int32/int64 [2] tensor."""
  input_ids = tf.convert_to_tensor(input_ids, tf.int32)
  input_mask = tf.convert_to_tensor(input_mask, tf.int32)
  seed_positions, seed_keep = tf.unstack(
      tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), 2))
  batch = tf.shape(input_ids)[0]

  candidates = candidates_mask(input_ids, input_mask, special_ids)
  has_candidate = tf.reduce_any(candidates, -1)
  num_tokens = tf.cast(tf.reduce_sum(input_mask, -1), tf.float32)
  num_to_predict = tf.maximum(1, tf.minimum(
      max_predictions, tf.cast(tf.round(num_tokens * mask_prob), tf.int32)))
  weights = tf.sequence_mask(num_to_predict, max_predictions, tf.float32)
  weights *= tf.cast(has_candidate, tf.float32)[:, None]  # guard: nothing to mask

  # Uniform over candidates; -inf elsewhere (a row with none gets uniform dummies,
  # which carry weight 0).
  logits = tf.where(candidates, 0.0, float("-inf"))
  logits = tf.where(has_candidate[:, None], logits, tf.zeros_like(logits))
  # XLA compiles stateless_categorical only with an int32 seed.
  seed_positions = tf.cast(tf.math.floormod(seed_positions, 2**31), tf.int32)
  positions = tf.random.stateless_categorical(logits, max_predictions, seed_positions,
                                              dtype=tf.int32)
  positions *= tf.cast(weights, tf.int32)
  masked_lm_ids = tf.gather(input_ids, positions, batch_dims=1)
  masked_lm_ids *= tf.cast(weights, tf.int32)

  to_mask = tf.random.stateless_uniform([batch, max_predictions], seed_keep) < 0.85
  masked_ids = scatter_tokens(input_ids, positions,
                              tf.fill(tf.shape(positions), mask_id),
                              weights * tf.cast(to_mask, tf.float32))
  return MaskedInputs(masked_ids, positions, masked_lm_ids, weights)
