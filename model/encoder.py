"""The ELECTRA (BERT) encoder in tf_keras: embeddings, optional projection, layers.

Transformer layers are tf-models-official's TransformerEncoderBlock, which is BERT's
post-LayerNorm block exactly, given two settings checked against the original: the
activation must be tf_keras's exact erf GELU (tfm's own "gelu" name maps to the tanh
approximation, which differs by up to 4.7e-4), and LayerNorm epsilon 1e-12.
"""

import tensorflow as tf
import tf_keras
from official.nlp.modeling import layers as tfm_layers

from model import fused
from model.config import ModelConfig
from model.dropout import KeyedDropout, dropout_generators
from model.internals import block_layers

ATTENTION_DIRECTIONS = ("bidirectional", "ltr", "rtl")


@tf.custom_gradient
def gelu(x):
  """The exact erf GELU, the same ops as tf.nn.gelu(approximate=False), whose
  gradient keeps only x: autodiff of that formula keeps three more tensors of x's size
  (-x/sqrt(2), erfc of it, x/2; bench/RESULTS.md, "Pre-training memory")."""
  return fused.gelu_value(x), lambda dy: dy * fused.gelu_derivative(x)


def activation(name: str):
  """The original's activations: "gelu" is the exact erf form."""
  if name == "gelu":
    return gelu
  return tf_keras.activations.get(name)


def initializer(config: ModelConfig):
  return tf_keras.initializers.TruncatedNormal(stddev=config.initializer_range)


def layer_norm(name: str):
  # float32 even under mixed precision, as tfm does for its LayerNorms.
  return tf_keras.layers.LayerNormalization(axis=-1, epsilon=1e-12, dtype=tf.float32,
                                            name=name)


class ElectraEmbeddings(tf_keras.layers.Layer):
  """Word + position + token-type embeddings, LayerNorm, dropout (width E); generator
  and discriminator share one by default."""

  def __init__(self, config: ModelConfig, **kwargs):
    kwargs.setdefault("name", "embeddings")
    super().__init__(**kwargs)
    self.model_config = config = ModelConfig.coerce(config)
    self.embedding_width = config.embedding_width
    self.word_embeddings = tfm_layers.OnDeviceEmbedding(
        config.vocab_size, self.embedding_width, initializer=initializer(config),
        name="word_embeddings")
    self.position_embeddings = tfm_layers.PositionEmbedding(
        config.max_position_embeddings, initializer=initializer(config),
        name="position_embeddings")
    self.token_type_embeddings = tfm_layers.OnDeviceEmbedding(
        config.type_vocab_size, self.embedding_width, initializer=initializer(config),
        use_one_hot=True, name="token_type_embeddings")
    self.layer_norm = layer_norm("layer_norm")
    self.dropout = KeyedDropout(config.hidden_dropout_prob)  # model/dropout.py: why

  @property
  def embedding_table(self) -> tf.Variable:
    return self.word_embeddings.embeddings

  @property
  def position_table(self) -> tf.Variable:
    return self.position_embeddings.weights[0]

  def call(self, input_ids, segment_ids, training=None):
    words = self.word_embeddings(input_ids)
    x = words + self.position_embeddings(words) + self.token_type_embeddings(segment_ids)
    return self.dropout(self.layer_norm(x), training=training)

  def get_config(self):
    return {**super().get_config(), "config": self.model_config.to_dict()}


class ElectraEncoder(tf_keras.Model):
  """Embeddings -> embeddings_project (when E != H) -> post-LN transformer layers:
  {input_ids, input_mask, segment_ids} int32 [B, S] -> the last layer's states [B, S, H].
  `attention_direction` "ltr"/"rtl" adds a causal mask (Electric's two-tower generator);
  `recompute`: use_recompute."""

  recompute = False

  def __init__(self, config: ModelConfig, embeddings: ElectraEmbeddings = None,
               attention_direction: str = "bidirectional", **kwargs):
    super().__init__(**kwargs)
    if attention_direction not in ATTENTION_DIRECTIONS:
      raise ValueError(f"attention_direction {attention_direction!r}: expected one of "
                       f"{ATTENTION_DIRECTIONS}")
    self.model_config = config
    self.attention_direction = attention_direction
    self.embeddings = embeddings if embeddings is not None else ElectraEmbeddings(config)
    self.embeddings_project = None
    if self.embeddings.embedding_width != config.hidden_size:
      # The original's tf.layers.dense default: glorot-uniform kernel, zero bias.
      self.embeddings_project = tf_keras.layers.Dense(config.hidden_size,
                                                      name="embeddings_project")
    hidden_activation = activation(config.hidden_act)
    self.transformer_layers = [
        fused.FusedTransformerEncoderBlock(
            num_attention_heads=config.num_attention_heads,
            inner_dim=config.intermediate_size,
            inner_activation=hidden_activation,
            exact_gelu=hidden_activation is gelu,
            output_dropout=config.hidden_dropout_prob,
            attention_dropout=config.attention_probs_dropout_prob,
            norm_first=False,
            norm_epsilon=1e-12,
            kernel_initializer=initializer(config),
            name=f"layer_{i}")
        for i in range(config.num_hidden_layers)]

  @property
  def embedding_table(self) -> tf.Variable:
    return self.embeddings.embedding_table

  def attention_mask(self, input_mask, seq_length):
    """[B, S, S] float mask: padding columns off, plus causal band for ltr/rtl."""
    # expand_dims, not input_mask[:, None, :]: LiteRT has no builtin kernel for that
    # strided slice once both the batch and the sequence axis are free (the exports).
    mask = tf.cast(tf.expand_dims(input_mask, 1), tf.float32) * tf.ones([seq_length, 1])
    if self.attention_direction != "bidirectional":
      ones = tf.ones([seq_length, seq_length])
      band = (tf.linalg.band_part(ones, -1, 0) if self.attention_direction == "ltr"
              else tf.linalg.band_part(ones, 0, -1))
      mask *= band[None]
    return mask

  def _embed(self, inputs, training=None):
    """(the first layer's input [B, S, H], the attention mask [B, S, S])."""
    input_ids = inputs["input_ids"]
    x = self.embeddings(input_ids, inputs["segment_ids"], training=training)
    if self.embeddings_project is not None:
      x = self.embeddings_project(x)
    return x, self.attention_mask(inputs["input_mask"], tf.shape(input_ids)[1])

  def inspect(self, inputs):
    """(every layer's input and the last's output [B, S, H], every layer's attention
    weights [B, heads, S, S]) of one inference pass."""
    x, mask = self._embed(inputs)
    states, probs = [x], []
    for layer in self.transformer_layers:
      _, layer_probs = block_layers(layer).attention(
          x, x, attention_mask=mask, return_attention_scores=True)
      probs.append(layer_probs)
      x = layer([x, mask])
      states.append(x)
    return states, probs

  def call(self, inputs, training=None):
    x, mask = self._embed(inputs, training=training)
    for layer in self.transformer_layers:
      if self.recompute and training:
        x = recomputed_call(layer, x, mask)
      else:
        x = layer([x, mask], training=training)
    return x


def use_recompute(model: tf_keras.Model, recompute: bool):
  """Gradient checkpointing in every ElectraEncoder of `model`: in training, each
  transformer layer keeps only its input for the backward pass, where it runs again.
  Same loss and gradients, activations of one layer instead of all; the layers run
  twice, about a third more time per step."""
  for module in [model, *model.submodules]:
    if isinstance(module, ElectraEncoder):
      module.recompute = recompute


def recomputed_call(layer: tf_keras.layers.Layer, x, mask):
  """layer([x, mask], training=True) whose activations are recomputed in backprop,
  dropping the same units: the layer's dropout generators are first put back to their
  states before the forward pass. Legacy stateful dropout (no generator to put back:
  training/runtime.py use_checkpointed_dropout) is refused."""
  try:
    generators = dropout_generators(layer, strict=True)
  except ValueError as e:
    raise ValueError(f"recompute: {e}") from None
  states = [tf.identity(g.state) for g in generators]

  # The mask comes in from outside, not as an argument: that would make the backward
  # pass compute its gradient ([B, S, S] per layer), which nothing needs.
  @tf.recompute_grad
  def forward(x):
    for generator, state in zip(generators, states):
      generator.state.assign(state)
    return layer([x, mask], training=True)
  return forward(x)
