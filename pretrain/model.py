"""The pre-training model: the networks, the masking, and the objective that trains them.

PretrainingModel holds the ElectraPair (discriminator, generator, heads) that the
checkpoint exporters write, Electric's two-tower generator when the config asks for
one, and the objective (pretrain/objectives/) the config chooses, which computes the
loss from them. All randomness is stateless, from the seed passed to `compute`, so a
resumed run draws the same masks and samples.
"""

import collections
from typing import Dict, Optional, Tuple

import tensorflow as tf
import tf_keras

from data_prep import masking
from data_prep.records import STATIC_MASK_FEATURES
from data_prep.vocab import load_vocab
from model.electra import ElectraPair, TwoTowerGenerator
from pretrain.config import PretrainingConfig
from pretrain.objectives import objective_for

SpecialTokens = collections.namedtuple("SpecialTokens", ["cls_id", "sep_id", "mask_id"])


def special_tokens_from_vocab(vocab_file: str) -> SpecialTokens:
  """The ids of [CLS], [SEP] and [MASK] in a (validated) BERT vocab.txt."""
  vocab = load_vocab(vocab_file)
  return SpecialTokens(vocab.cls_id, vocab.sep_id, vocab.mask_id)


class PretrainingModel(tf_keras.Model):
  """The networks of the config's objective and their loss.

  `.electra` is the ElectraPair; Electric's generator is `.two_tower` (its ElectraPair
  generator and generator head stay unused and unbuilt); `.objective` the objective.
  `special_tokens` defaults to the ids in config.vocab_file.
  """

  def __init__(self, config: PretrainingConfig,
               special_tokens: Optional[SpecialTokens] = None, **kwargs):
    kwargs.setdefault("name", "pretraining_model")
    super().__init__(**kwargs)
    self.pretraining_config = config
    self.objective = objective_for(config)
    self.special_tokens = special_tokens or special_tokens_from_vocab(config.vocab_file)
    self.model_config = config.model_config()
    self.electra = ElectraPair(self.model_config)
    self.two_tower = None
    if self.objective.two_tower:
      shared = (None if config.untied_generator_embeddings
                else self.electra.discriminator.embeddings)
      self.two_tower = TwoTowerGenerator(self.model_config.generator_config(), shared)

  @staticmethod
  def _static_masks(batch: Dict[str, tf.Tensor]) -> Optional[masking.MaskedInputs]:
    """The record's own masks (static masking), or None."""
    if not all(key in batch for key in STATIC_MASK_FEATURES):
      return None
    return masking.MaskedInputs(tf.cast(batch["input_ids"], tf.int32),
                                tf.cast(batch["masked_lm_positions"], tf.int32),
                                tf.cast(batch["masked_lm_ids"], tf.int32),
                                tf.cast(batch["masked_lm_weights"], tf.float32))

  @classmethod
  def original_ids(cls, batch: Dict[str, tf.Tensor]) -> tf.Tensor:
    """The batch's tokens before any masking (static masks written back)."""
    static = cls._static_masks(batch)
    if static is None:
      return tf.cast(batch["input_ids"], tf.int32)
    return masking.scatter_tokens(static.input_ids, static.masked_lm_positions,
                                  static.masked_lm_ids, static.masked_lm_weights)

  def mask(self, batch: Dict[str, tf.Tensor], seed) -> Tuple[tf.Tensor,
                                                              masking.MaskedInputs]:
    """(original ids, masked inputs); static masks in `batch` are used as they are."""
    static = self._static_masks(batch)
    if static is not None:
      return self.original_ids(batch), static
    input_ids = tf.cast(batch["input_ids"], tf.int32)
    return input_ids, masking.mask_inputs(
        input_ids, batch["input_mask"], mask_prob=self.pretraining_config.mask_prob,
        max_predictions=self.pretraining_config.max_predictions_per_seq,
        mask_id=self.special_tokens.mask_id, special_ids=self.special_tokens, seed=seed)

  def compute(self, batch: Dict[str, tf.Tensor], seed, training: bool, step=None
              ) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
    """(total loss, outputs) for one per-replica batch; `seed` is an int [2] tensor and
    `step` the training step (for disc_weight_ramp_steps).

    Replicas need different seeds (training.runtime.stateless_seed folds in the replica
    id). The loss is this replica's mean; outputs hold the scalars "mlm_loss" (masked
    positions), "cloze_loss" (two-tower generators) and "disc_loss", and the tensors
    PretrainingMetrics reads.
    """
    return self.objective.compute(self, batch, seed, training, step)

  def build_variables(self, seq_length: int = 8):
    """Creates every variable the objective uses by running one tiny batch."""
    self.compute(self.electra.dummy_inputs(1, seq_length), tf.constant([0, 0]),
                 training=False)
    return self
