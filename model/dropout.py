"""The dropout layers' random generators, which checkpoints hold and recompute rewinds."""

import tf_keras

from model.internals import draws_from_generator, dropout_generator


def dropout_generators(layer: tf_keras.layers.Layer, strict: bool = False) -> list:
  """The tf.random.Generators of the dropout layers inside `layer`, created now (Keras
  makes them at the first training call). `strict`: a dropout layer drawing from Keras'
  legacy stateful ops (no generator to save or rewind) is an error."""
  generators = []
  for module in layer.submodules:
    if not draws_from_generator(module):
      continue
    generator = dropout_generator(module)
    if generator is not None:
      generators.append(generator)
    elif strict and getattr(module, "rate", 0):
      raise ValueError(
          f"dropout layer {module.name} draws from Keras' legacy stateful ops, whose "
          "masks cannot be drawn again; call training.runtime.use_checkpointed_dropout "
          "before building the model")
  return generators
