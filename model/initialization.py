"""Start points of pre-training, and fine-tuning's changes of pre-trained values; each
sets values only, so checkpoints keep the original's names and shapes. Why each exists:
docs/cpu_recipe.md.

"truncated_normal" is the original's (the variables' own initializers). "mimetic" (after
Trockman and Kolter, "Mimetic Initialization of Self-Attention Layers", ICML 2023):
- position embeddings become sinusoids (smooth in position: neighbours are similar),
  POSITION_SCALE times the token embeddings' per-element std;
- in every transformer layer and head, query x key^T = NOISE Z + IDENTITY I and
  value x output = NOISE Z - IDENTITY I (Z Gaussian with variance 1/width),
  factored by SVD into the head's kernels. Attention then follows similarity, which
  with dominant smooth positions is locality, from step 0.
"mimetic_generator" (the generator alone) and "mimetic_open_cls" ([CLS]'s embedding
sum exactly zero, so its first-layer attention is uniform: open_cls_row): as
docs/pretraining.md says.
"""

import math
from typing import Iterable, Optional

import numpy as np
import tensorflow as tf

from model.config import INIT_ADJUSTMENTS, INIT_SCHEMES
from model.electra import DiscriminatorHead, ElectraPair, GeneratorHead
from model.encoder import ElectraEmbeddings, ElectraEncoder
from model.internals import block_layers

# The mimetic start's settings (the module's words).
POSITION_SCALE, NOISE, IDENTITY = 4.0, 0.2, 0.7


def sinusoids(num_positions: int, width: int, rms: float) -> np.ndarray:
  """[num_positions, width] sin/cos pairs at geometric frequencies (as the Transformer's
  position encoding), each element's root-mean-square `rms`."""
  frequencies = 1.0 / (10000.0 ** (np.arange(width // 2) * 2.0 / width))
  angles = np.arange(num_positions)[:, None] * frequencies[None]
  table = np.zeros([num_positions, width])
  table[:, 0:2 * (width // 2):2] = np.sin(angles)
  table[:, 1:2 * (width // 2):2] = np.cos(angles)
  return table * rms * np.sqrt(2.0)


def factored_pair(rng: np.random.Generator, width: int, rank: int, noise: float,
                  identity: float):
  """(A [width, rank], B [rank, width]) with A @ B the rank-`rank` part of
  noise * Z + identity * I, Z ~ N(0, 1 / width)."""
  target = noise * rng.normal(0, 1 / np.sqrt(width), [width, width]) + identity * np.eye(
      width)
  u, s, vt = np.linalg.svd(target)
  root = np.sqrt(s[:rank])
  return u[:, :rank] * root, root[:, None] * vt[:rank]


def mimetic_attention(encoder: ElectraEncoder, rng: np.random.Generator):
  """Sets every layer's query/key and value/output kernels of `encoder` (biases stay)."""
  for block in encoder.transformer_layers:
    layers = block_layers(block)
    width, heads, head_size = layers.query.kernel.shape
    query, key, value = (np.zeros([width, heads, head_size]) for _ in range(3))
    output = np.zeros([heads, head_size, width])
    for h in range(heads):
      query[:, h], key_t = factored_pair(rng, width, head_size, NOISE, IDENTITY)
      key[:, h] = key_t.T
      value[:, h], output[h] = factored_pair(rng, width, head_size, NOISE, -IDENTITY)
    for dense, kernel in ((layers.query, query), (layers.key, key),
                          (layers.value, value), (layers.attention_output, output)):
      dense.kernel.assign(tf.cast(kernel, dense.kernel.dtype))


# Significand bits of the dtypes the embeddings may sum in (mixed precision casts them).
SIGNIFICAND_BITS = {tf.float32: 24, tf.bfloat16: 8, tf.float16: 11}


def open_cls_row(embeddings: ElectraEmbeddings, cls_id: int):
  """Sets [CLS]'s word-embedding row to minus (position row 0 + token-type row 0), so
  that [CLS] at position 0 in segment 0 embeds to exactly zero.

  Exactly, in any order of the three-way sum and in the embeddings' compute dtype: the
  two rows are first rounded, per element, to a multiple of a power of two small enough
  that both, their sum and its negative are exact (in float32 a change of at most 2^-23
  of each element's |position| + |token type|)."""
  words, positions = embeddings.embedding_table, embeddings.position_table
  types = embeddings.token_type_embeddings.embeddings
  if not 0 <= cls_id < words.shape[0]:
    raise ValueError(f"[CLS] id {cls_id} is outside the vocabulary of {words.shape[0]}")
  bits = SIGNIFICAND_BITS[tf.as_dtype(embeddings.compute_dtype)]
  position = positions[0].numpy().astype(np.float64)
  token_type = types[0].numpy().astype(np.float64)
  size = np.abs(position) + np.abs(token_type)
  # Integers below 2^bits times this step are exact; the extra bit covers the rounding.
  step = np.exp2(np.ceil(np.log2(np.where(size > 0, size, 1.0))) + 1 - bits)
  position = np.round(position / step) * step
  token_type = np.round(token_type / step) * step
  for table, row, value in ((positions, 0, position), (types, 0, token_type),
                            (words, cls_id, -(position + token_type))):
    # Whole tables: a mixed-precision (autocast) variable's slice cannot be assigned.
    values = table.numpy()
    values[row] = value
    table.assign(values)


def encoders_of(model) -> Iterable[ElectraEncoder]:
  """Every built ElectraEncoder in `model` (submodules are distinct: a tied generator is
  the discriminator, listed once; Electric leaves its pair's generator unbuilt)."""
  return [m for m in [model, *model.submodules]
          if isinstance(m, ElectraEncoder) and m.built]


def apply_init_scheme(model, scheme: str, seed: int, initializer_range: float,
                      cls_id: Optional[int] = None):
  """Re-initializes the (built) encoders of `model` by `scheme`; truncated_normal, the
  variables' own initializers, is left as built. `cls_id`: [CLS]'s id, which
  mimetic_open_cls needs."""
  if scheme not in INIT_SCHEMES:
    raise ValueError(f"init_scheme {scheme!r}: expected one of {INIT_SCHEMES}")
  if scheme == "mimetic_open_cls" and cls_id is None:
    raise ValueError("init_scheme mimetic_open_cls needs the id of [CLS] (cls_id)")
  if scheme == "truncated_normal":
    return
  rng = np.random.default_rng(seed)
  if scheme == "mimetic_generator":
    pair = next(m for m in [model, *model.submodules] if isinstance(m, ElectraPair))
    encoders = [pair.generator]
    # Embeddings the discriminator reads keep the original's start.
    tables = [] if pair.generator.embeddings is pair.discriminator.embeddings else [
        pair.generator.embeddings]
  else:
    encoders = encoders_of(model)
    # Shared embeddings (the generator reads the discriminator's) are set once.
    tables = {id(e.embeddings): e.embeddings for e in encoders}.values()
  for embeddings in tables:
    table = embeddings.position_table
    table.assign(tf.cast(sinusoids(*table.shape, POSITION_SCALE * initializer_range),
                         table.dtype))
  for encoder in encoders:
    mimetic_attention(encoder, rng)
  if scheme == "mimetic_open_cls":
    for embeddings in tables:
      open_cls_row(embeddings, cls_id)


def prior_discriminator_head(head: DiscriminatorHead, replaced_rate: float):
  """Starts the discriminator at the base rate: its output kernel zero and its bias
  log(rate / (1 - rate)) (0 for a rate of None: the logits already carry it).

  A new option (the "prior" initialization of an imbalanced classifier's last layer, as
  in Lin et al., "Focal Loss", 2017). The original's random output layer's pull toward
  the base rate reaches every layer below before any token can be told apart (the
  discriminator's states collapse); from a zero kernel the head's first gradient is the
  direction that separates replaced from original tokens, and only that reaches the
  encoder."""
  kernel, bias = head.dense_1.kernel, head.dense_1.bias
  kernel.assign(tf.zeros_like(kernel))
  prior = 0.0 if replaced_rate is None else math.log(replaced_rate / (1 - replaced_rate))
  bias.assign(tf.fill(tf.shape(bias), tf.cast(prior, bias.dtype)))


def unigram_generator_head(head: GeneratorHead, log_frequencies: np.ndarray):
  """Starts the generator's softmax at the data's unigram distribution: its output bias
  becomes the tokens' log-frequencies (the word-embedding logits start small, so
  samples are unigram draws from step 0).

  A new option. From the original's zero bias the first samples are mostly rare tokens,
  so the discriminator first learns "a rare token was replaced" from the token alone,
  a cue gone once the generator has learned the unigram (its states collapse while it
  unlearns it); from a unigram start only context tells a sample from the original."""
  bias = head.output_bias
  bias.assign(tf.cast(log_frequencies, bias.dtype))


def adjust_pretrained(encoder: ElectraEncoder, adjustment: str):
  """A new option for encoders pre-trained briefly from the mimetic start, whose states
  are mostly position and whose [CLS] attends to itself. "attention": every layer's
  query kernel and bias become zero, so attention starts uniform over the sentence
  (as random weights' does) and learns its pattern anew from the keys, values and
  feed-forward layers kept; "positions": the position embeddings are scaled so that
  their rows' mean norm equals the word embeddings'."""
  if adjustment not in INIT_ADJUSTMENTS:
    raise ValueError(f"init_adjustment {adjustment!r}: expected one of {INIT_ADJUSTMENTS}")
  if adjustment in ("attention", "attention_and_positions"):
    for block in encoder.transformer_layers:
      query = block_layers(block).query
      query.kernel.assign(tf.zeros_like(query.kernel))
      query.bias.assign(tf.zeros_like(query.bias))
  if adjustment in ("positions", "attention_and_positions"):
    embeddings = encoder.embeddings
    table = embeddings.position_table
    words = tf.reduce_mean(tf.norm(embeddings.embedding_table, axis=-1))
    positions = tf.reduce_mean(tf.norm(table, axis=-1))
    table.assign(table * words / positions)
