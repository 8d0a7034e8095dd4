"""The fine-tuning model: the discriminator's encoder with one head per task, and its
loss (FinetuningLoss, the objective training/step.py's TrainStep calls). Layer-wise
learning rates follow the original's depths: embeddings (and embeddings_project) 0,
layer i i+1, task heads L+2; a variable's rate is lr * decay ** (L + 2 - depth).
"""

import re
from typing import Dict

import tensorflow as tf
import tf_keras

from model.config import ModelConfig
from model.encoder import ElectraEncoder
from model.initialization import adjust_pretrained
from model.weights.formats import Weights
from model.weights.original import encoder_variables


class FinetuningModel(tf_keras.Model):
  """`heads` maps a head name to a layer called as head(sequence_output, batch)."""

  def __init__(self, config: ModelConfig, heads: Dict[str, tf_keras.layers.Layer]):
    super().__init__(name="finetuning")
    self.model_config = config
    self.encoder = ElectraEncoder(config, name="discriminator")
    self.heads = dict(heads)

  def call(self, inputs, training=None):
    hidden = self.encoder(inputs, training=training)
    return {name: head(hidden, inputs, training=training)
            for name, head in self.heads.items()}

  def build_variables(self, example_batch):
    self(example_batch, training=False)
    return self

  def load_pretrained(self, weights: Weights, adjustment: str = "none") -> str:
    """Loads the encoder from pre-trained weights (the discriminator's), then applies
    init_adjustment's change of their values (model/initialization.py)."""
    location = weights.load_encoder(self.encoder)
    adjust_pretrained(self.encoder, adjustment)
    return location

  def lr_multiplier(self, layerwise_lr_decay: float):
    """callable(variable) -> its lr multiplier, its depth read from its original name."""
    top = self.model_config.num_hidden_layers + 2
    depths = {id(variable): top for head in self.heads.values()
              for variable in head.trainable_variables}
    for name, variable, _ in encoder_variables(self.encoder, "electra"):
      layer = re.search(r"/layer_(\d+)/", name)
      depths[id(variable)] = int(layer.group(1)) + 1 if layer else 0
    return lambda variable: layerwise_lr_decay ** (top - depths[id(variable)])


class FinetuningLoss:
  """Each feature's loss by its task's runner (`runners[task_id]`)."""

  def __init__(self, runners, batch_size: int):
    self.runners, self.batch_size = runners, batch_size

  def compute(self, model, batch, seed, training: bool, step):
    del seed, step
    outputs = model(batch, training=training)
    losses = tf.zeros(tf.shape(batch["task_id"]), tf.float32)
    for index, runner in enumerate(self.runners):
      if runner.task.train_split:
        mine = tf.equal(batch["task_id"], index)
        losses += tf.where(mine, runner.loss(outputs[runner.head_name], batch), 0.0)
    mean = tf.reduce_mean(losses)
    # The step averages replica losses; scaling the mean by the global batch makes its
    # gradient that of the original's batch sum.
    return mean * self.batch_size, {"mean_loss": mean}

  @staticmethod
  def logged(outputs):
    return outputs
