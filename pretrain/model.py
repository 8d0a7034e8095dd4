"""The pre-training networks: the ElectraPair (discriminator, generator, heads) that the
checkpoint exporters write, and Electric's two-tower generator when the config asks for
one; the objective (pretrain/objectives/) runs the step over them."""

import collections
from typing import Optional

import tensorflow as tf
import tf_keras

from data_prep.vocab import load_vocab
from model.electra import ElectraPair, TwoTowerGenerator
from pretrain.config import PretrainingConfig
from pretrain.objectives import objective_for

SpecialTokens = collections.namedtuple("SpecialTokens", ["cls_id", "sep_id", "mask_id"])


class PretrainingModel(tf_keras.Model):
  """The networks of the config's objective: `.electra`, and Electric's generator
  `.two_tower` (the pair's generator and its head then unused and unbuilt).
  `special_tokens` (what masking reads): by default config.vocab_file's."""

  def __init__(self, config: PretrainingConfig,
               special_tokens: Optional[SpecialTokens] = None):
    super().__init__(name="pretraining_model")
    self.pretraining_config = config
    if special_tokens is None:
      vocab = load_vocab(config.vocab_file)
      special_tokens = SpecialTokens(vocab.cls_id, vocab.sep_id, vocab.mask_id)
    self.special_tokens = special_tokens
    self.model_config = config.model_config()
    self.electra = ElectraPair(self.model_config)
    self.two_tower = None
    if config.two_tower_generator:
      shared = (None if config.untied_generator_embeddings
                else self.electra.discriminator.embeddings)
      self.two_tower = TwoTowerGenerator(self.model_config.generator_config(), shared)

  def build_variables(self, seq_length: int = 8):
    """Creates every variable the config's objective uses (and no other) by running its
    step once on a tiny batch."""
    objective_for(self.pretraining_config).compute(
        self, self.electra.dummy_inputs(1, seq_length), tf.constant([0, 0]),
        training=False)
    return self
