"""The private modules and attributes of TensorFlow, tf-models-official and tf_keras
that the project reads, in one place: an upgrade of any (all pinned in
requirements.txt) that renames them is fixed here. Everything else reaches them through
these functions: tf-models' TransformerEncoderBlock's sublayers and settings, Keras'
MultiHeadAttention's projections, its Dropout's random generator, its legacy optimizer's
slots, TensorFlow's smart_cond, its coordination service and its LiteRT flatbuffer
schema.
"""

import dataclasses
from typing import Optional

import tensorflow as tf
from tensorflow.python.distribute import multi_worker_util
from tensorflow.python.eager import context
import tf_keras
from tf_keras.src.optimizers.legacy import optimizer_v2


@dataclasses.dataclass(frozen=True)
class BlockLayers:
  """A TransformerEncoderBlock's sublayers, by what they are."""
  attention: tf_keras.layers.MultiHeadAttention
  query: tf_keras.layers.Layer  # EinsumDense kernels [width, heads, head_size]
  key: tf_keras.layers.Layer
  value: tf_keras.layers.Layer
  attention_output: tf_keras.layers.Layer  # [heads, head_size, width]
  attention_norm: tf_keras.layers.LayerNormalization
  intermediate: tf_keras.layers.Layer
  # The inner activation as a layer: its dtype is what the GELU computes in (tf-models
  # makes it float32 under mixed_bfloat16).
  intermediate_activation: tf_keras.layers.Activation
  output: tf_keras.layers.Layer
  output_norm: tf_keras.layers.LayerNormalization
  probs_dropout: tf_keras.layers.Dropout  # on the attention probabilities
  attention_dropout: tf_keras.layers.Dropout  # on the attention's output
  output_dropout: tf_keras.layers.Dropout  # on the feed-forward's output


def block_layers(block) -> BlockLayers:
  # pylint: disable=protected-access
  attention = block._attention_layer
  return BlockLayers(
      attention=attention, query=attention._query_dense, key=attention._key_dense,
      value=attention._value_dense, attention_output=attention._output_dense,
      attention_norm=block._attention_layer_norm, intermediate=block._intermediate_dense,
      intermediate_activation=block._intermediate_activation_layer,
      output=block._output_dense, output_norm=block._output_layer_norm,
      probs_dropout=attention._dropout_layer, attention_dropout=block._attention_dropout,
      output_dropout=block._output_dropout)


def plain_post_layer_norm(block) -> bool:
  """Whether `block` is configured as ELECTRA's (what model/fused.py computes): post
  LayerNorm with biases, Keras' MultiHeadAttention with a query residual, the whole
  sequence out, no inner dropout and none of tf-models' other variants."""
  # pylint: disable=protected-access
  return not (
      block._output_range is not None or block._norm_first or not block._use_bias
      or block._use_rms_norm or not block._use_query_residual or block._inner_dropout
      or block._return_attention_scores or block._linformer_dim is not None
      or block._output_last_dim is not None or block._value_dim is not None
      or type(block._attention_layer) is not tf_keras.layers.MultiHeadAttention)


def attention_scale(block) -> float:
  """What `block`'s attention multiplies its query by: 1 / sqrt(key_dim)."""
  return 1.0 / float(block._key_dim) ** 0.5  # pylint: disable=protected-access


def draws_from_generator(layer) -> bool:
  """Whether `layer` draws random numbers through Keras' RandomGenerator (dropout)."""
  return getattr(layer, "_random_generator", None) is not None


def dropout_generator(layer) -> Optional[tf.random.Generator]:
  """The tf.random.Generator a Keras dropout layer draws its masks from, created now
  (Keras makes it at the first training call); None when the layer draws from Keras'
  legacy stateful ops instead."""
  rng = layer._random_generator  # pylint: disable=protected-access
  rng._maybe_init()  # pylint: disable=protected-access
  return rng._generator  # pylint: disable=protected-access


def draw_key(layer):
  """Two int32 words from the random generator of Keras dropout layer `layer` (its
  checkpointed tf.random.Generator, or Keras' legacy seeded ops without one)."""
  return layer._random_generator.random_uniform(  # pylint: disable=protected-access
      [2], minval=-2 ** 31, maxval=2 ** 31 - 1, dtype=tf.int32)


def smart_cond(pred, true_fn, false_fn):
  """true_fn() or false_fn(), chosen in Python when `pred` is known at trace time (as
  Keras' Dropout chooses), else a tf.cond."""
  return tf.__internal__.smart_cond.smart_cond(pred, true_fn, false_fn)


def replace_block_dropouts(block, input_shape, make_dropout):
  """Replaces the three dropout layers of tf-models' TransformerEncoderBlock `block`
  (built) by make_dropout(old layer). Builds the attention's sublayers from the input
  shape first (without variables: those come at the first call, under the same names)
  so that its softmax's dropout exists to be replaced before anything draws from it."""
  # pylint: disable=protected-access
  attention = block._attention_layer
  if not attention._built_from_signature:
    attention._build_from_signature(query=input_shape, value=input_shape)
  for owner, name in ((attention, "_dropout_layer"), (block, "_attention_dropout"),
                      (block, "_output_dropout")):
    old = getattr(owner, name)
    delattr(owner, name)  # Keras then stops tracking it (a plain assignment would not)
    setattr(owner, name, make_dropout(old))


# The dense layers reading a block's input or its attention's LayerNorm, by
# BlockLayers' names: where each is kept.
_INPUT_DENSE = {"query": ("_attention_layer", "_query_dense"),
                "key": ("_attention_layer", "_key_dense"),
                "value": ("_attention_layer", "_value_dense"),
                "intermediate": ("", "_intermediate_dense")}


def swap_block_input_dense(block, name: str, layer):
  """Puts `layer` where `block` keeps its dense layer `name` (query, key, value or
  intermediate) and returns the one it held. Keras does not track the swap: the model's
  variables, their order and its checkpoints stay as they were."""
  owner_name, attribute = _INPUT_DENSE[name]
  return _swap_untracked(getattr(block, owner_name) if owner_name else block, attribute,
                         layer)


def swap_transformer_layers(encoder, layers):
  """Puts the list `layers` where the ElectraEncoder `encoder` keeps its transformer
  blocks and returns the list it held; untracked, as swap_block_input_dense."""
  return _swap_untracked(encoder, "transformer_layers", layers)


def _swap_untracked(owner, attribute: str, value):
  held = getattr(owner, attribute)
  owner._self_setattr_tracking = False  # pylint: disable=protected-access
  try:
    setattr(owner, attribute, value)
  finally:
    owner._self_setattr_tracking = True  # pylint: disable=protected-access
  return held


def create_slots(optimizer, variables):
  optimizer._create_all_weights(variables)  # pylint: disable=protected-access


def variable_key(variable) -> str:
  """The key a Keras legacy optimizer files `variable`'s slots under."""
  return optimizer_v2._var_key(variable)  # pylint: disable=protected-access


def configure_coordination_service(cluster: tf.train.ClusterSpec, wait_seconds: int):
  """The runtime's coordination service for `cluster`, configured as
  MultiWorkerMirroredStrategy configures it, but with the workers registering through a
  barrier that times out after `wait_seconds`."""
  runtime = context.context()
  runtime.configure_coordination_service(
      service_type="standalone",
      service_leader=multi_worker_util.coordination_leader(cluster),
      cluster_register_timeout_in_ms=wait_seconds * 1000)
  config = runtime.coordination_service
  config.cluster_register_with_barrier = True
  for job in ("chief", "worker"):
    if job in cluster.jobs:
      config.coordinated_job_list.add(name=job, num_tasks=cluster.num_tasks(job))


def litert_flatbuffer():
  """TensorFlow's LiteRT flatbuffer schema and flatbuffer_utils, its models' reader and
  writer (imported when asked: the export's)."""
  # pylint: disable=import-outside-toplevel
  from tensorflow.lite.python import schema_py_generated as schema
  from tensorflow.lite.tools import flatbuffer_utils
  return schema, flatbuffer_utils
