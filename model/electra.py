"""The ELECTRA generator/discriminator pair, with the original's weight sharing, and the
pre-training heads (the generator's masked-LM softmax, the discriminator's replaced-token
classifier) with the original's layer structure and initializers.

By default the generator is a smaller encoder that reads the discriminator's embedding
layer (one copy of word, position and token-type embeddings and their LayerNorm) and
keeps its own embeddings_project. `untied_generator_embeddings` gives the generator its
own embeddings at its hidden size; `untied_generator: false` makes generator and
discriminator one encoder (the original's "tie all weights"). Electric's generator is
not the pair's: TwoTowerGenerator, a cloze model of two one-directional encoders.
"""

from typing import Optional

import tensorflow as tf
import tf_keras

from model.config import ModelConfig
from model.encoder import (ElectraEmbeddings, ElectraEncoder, activation, initializer,
                           layer_norm)


class _Head(tf_keras.layers.Layer):
  """A pre-training head: its first layer is dense(-> `width`) + the config's activation
  with the encoder's initializer, as the original's."""

  def __init__(self, config: ModelConfig, width_of, **kwargs):
    super().__init__(**kwargs)
    self.model_config = config = ModelConfig.coerce(config)
    self.dense = tf_keras.layers.Dense(width_of(config),
                                       activation=activation(config.hidden_act),
                                       kernel_initializer=initializer(config),
                                       name="dense")

  def get_config(self):
    return {**super().get_config(), "config": self.model_config.to_dict()}


class GeneratorHead(_Head):
  """dense(h -> E) + GELU + LayerNorm, then logits = x @ word_embeddings^T + output_bias."""

  def __init__(self, config: ModelConfig, **kwargs):
    kwargs.setdefault("name", "generator_predictions")
    super().__init__(config, lambda c: c.embedding_width, **kwargs)
    self.layer_norm = layer_norm("layer_norm")

  def build(self, input_shape):
    self.output_bias = self.add_weight("output_bias", shape=[self.model_config.vocab_size],
                                       initializer="zeros", dtype=tf.float32)
    super().build(input_shape)

  def call(self, hidden, embedding_table):
    x = self.layer_norm(self.dense(hidden))
    # The [*, V] matmul runs in the compute dtype (bf16/fp16 under mixed precision);
    # logits are returned in float32 for the softmax.
    logits = tf.matmul(tf.cast(x, self.compute_dtype),
                       tf.cast(embedding_table, self.compute_dtype), transpose_b=True)
    return tf.cast(logits, tf.float32) + tf.cast(self.output_bias, tf.float32)


class DiscriminatorHead(_Head):
  """dense(H -> H) + GELU, then dense(H -> 1): one "replaced" logit per token."""

  def __init__(self, config: ModelConfig, **kwargs):
    kwargs.setdefault("name", "discriminator_predictions")
    super().__init__(config, lambda c: c.hidden_size, **kwargs)
    # The original's second tf.layers.dense passes no initializer: glorot uniform.
    self.dense_1 = tf_keras.layers.Dense(1, name="dense_1")

  def call(self, hidden):
    return tf.cast(tf.squeeze(self.dense_1(self.dense(hidden)), -1), tf.float32)


class ElectraPair(tf_keras.Model):

  def __init__(self, config: ModelConfig, **kwargs):
    kwargs.setdefault("name", "electra")
    super().__init__(**kwargs)
    self.model_config = config
    self.generator_model_config = config.generator_config()
    self.discriminator = ElectraEncoder(config, name="discriminator")
    if config.untied_generator:
      shared = None if config.untied_generator_embeddings else \
          self.discriminator.embeddings
      self.generator = ElectraEncoder(self.generator_model_config, embeddings=shared,
                                      name="generator")
    else:
      self.generator = self.discriminator
    self.generator_head = GeneratorHead(self.generator_model_config)
    self.discriminator_head = DiscriminatorHead(config)

  def generator_logits(self, inputs, training=None, positions=None, hidden=None):
    """MLM logits [B, N, V] at `positions` [B, N], or [B, S, V] at every position."""
    if hidden is None:
      hidden = self.generator(inputs, training=training)
    if positions is not None:
      hidden = tf.gather(hidden, positions, batch_dims=1)
    return self.generator_head(hidden, self.generator.embedding_table)

  def discriminator_logits(self, inputs, training=None, hidden=None):
    if hidden is None:
      hidden = self.discriminator(inputs, training=training)
    return self.discriminator_head(hidden)

  def call(self, inputs, training=None):
    """Every output of both networks on the same (uncorrupted) inputs."""
    disc_hidden = self.discriminator(inputs, training=training)
    gen_hidden = (disc_hidden if self.generator is self.discriminator
                  else self.generator(inputs, training=training))
    return {
        "discriminator_hidden": disc_hidden,
        "discriminator_logits": self.discriminator_logits(inputs, hidden=disc_hidden),
        "generator_hidden": gen_hidden,
        "generator_logits": self.generator_logits(inputs, hidden=gen_hidden),
    }

  @staticmethod
  def dummy_inputs(batch_size: int = 1, seq_length: int = 8):
    ones = tf.ones([batch_size, seq_length], tf.int32)
    return {"input_ids": ones, "input_mask": ones, "segment_ids": 0 * ones}

  def build_variables(self):
    """Creates every variable by running a tiny batch once."""
    self(self.dummy_inputs(), training=False)
    return self


class TwoTowerGenerator(tf_keras.Model):
  """Electric's cloze generator: position t reads the left-to-right tower's output at
  t - 1 and the right-to-left tower's at t + 1, never its own token. Like the
  original's, the shift is a roll: the ends read each other's ([CLS]/[SEP]/padding,
  never candidates)."""

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
