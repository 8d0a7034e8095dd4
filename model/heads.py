"""The pre-training heads: the generator's masked-LM softmax and the discriminator's
replaced-token classifier, with the original's layer structure and initializers."""

import tensorflow as tf
import tf_keras

from model.config import ModelConfig
from model.encoder import activation, initializer, layer_norm


class GeneratorHead(tf_keras.layers.Layer):
  """dense(h -> E) + GELU + LayerNorm, then logits = x @ word_embeddings^T + output_bias."""

  def __init__(self, config: ModelConfig, **kwargs):
    kwargs.setdefault("name", "generator_predictions")
    super().__init__(**kwargs)
    self.model_config = config = ModelConfig.coerce(config)
    self.dense = tf_keras.layers.Dense(config.embedding_width,
                                       activation=activation(config.hidden_act),
                                       kernel_initializer=initializer(config),
                                       name="dense")
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

  def get_config(self):
    return {**super().get_config(), "config": self.model_config.to_dict()}


class DiscriminatorHead(tf_keras.layers.Layer):
  """dense(H -> H) + GELU, then dense(H -> 1): one "replaced" logit per token."""

  def __init__(self, config: ModelConfig, **kwargs):
    kwargs.setdefault("name", "discriminator_predictions")
    super().__init__(**kwargs)
    self.model_config = config = ModelConfig.coerce(config)
    self.dense = tf_keras.layers.Dense(config.hidden_size,
                                       activation=activation(config.hidden_act),
                                       kernel_initializer=initializer(config),
                                       name="dense")
    # The original's second tf.layers.dense passes no initializer: glorot uniform.
    self.dense_1 = tf_keras.layers.Dense(1, name="dense_1")

  def call(self, hidden):
    return tf.cast(tf.squeeze(self.dense_1(self.dense(hidden)), -1), tf.float32)

  def get_config(self):
    return {**super().get_config(), "config": self.model_config.to_dict()}
