"""BERT's masked LM (`objective: masked_lm`; the original's `electra_objective: false`),
and the pieces of the generator's half every objective's step starts with.

One full-size encoder predicts the masked tokens; there is no discriminator, and the
encoder is saved as the pair's generator. ELECTRA and Electric start their steps with
the same plain functions, with the generator the config names: the pair's, a uniform
one (all logits zero) or Electric's two-tower cloze model.
"""

from typing import Dict, Optional, Tuple

import tensorflow as tf

from data_prep import masking
from data_prep.records import STATIC_MASK_FEATURES
from model import flops as model_flops
from model import memory as model_memory
from pretrain.config import PretrainingConfig
from pretrain.objectives.losses import masked_lm_loss, weighted_mean


def static_masks(batch: Dict[str, tf.Tensor]) -> Optional[masking.MaskedInputs]:
  """The record's own masks (static masking), or None."""
  if not all(key in batch for key in STATIC_MASK_FEATURES):
    return None
  return masking.MaskedInputs(tf.cast(batch["input_ids"], tf.int32),
                              tf.cast(batch["masked_lm_positions"], tf.int32),
                              tf.cast(batch["masked_lm_ids"], tf.int32),
                              tf.cast(batch["masked_lm_weights"], tf.float32))


def original_ids(batch: Dict[str, tf.Tensor]) -> tf.Tensor:
  """The batch's tokens before any masking (static masks written back)."""
  static = static_masks(batch)
  if static is None:
    return tf.cast(batch["input_ids"], tf.int32)
  return masking.scatter_tokens(static.input_ids, static.masked_lm_positions,
                                static.masked_lm_ids, static.masked_lm_weights)


def mask_batch(batch: Dict[str, tf.Tensor], config: PretrainingConfig, special_tokens,
               seed) -> Tuple[tf.Tensor, masking.MaskedInputs]:
  """(original ids, masked inputs); static masks in `batch` are used as they are, else
  the config's mask_prob and max_predictions_per_seq draw them from `seed`."""
  static = static_masks(batch)
  if static is not None:
    return original_ids(batch), static
  input_ids = tf.cast(batch["input_ids"], tf.int32)
  return input_ids, masking.mask_inputs(
      input_ids, batch["input_mask"], mask_prob=config.mask_prob,
      max_predictions=config.max_predictions_per_seq, mask_id=special_tokens.mask_id,
      special_ids=special_tokens, seed=seed)


def encoder_inputs(batch: Dict[str, tf.Tensor], input_ids) -> Dict[str, tf.Tensor]:
  """What an encoder reads: `input_ids` with the batch's mask and segments."""
  return {"input_ids": input_ids, "input_mask": tf.cast(batch["input_mask"], tf.int32),
          "segment_ids": tf.cast(batch["segment_ids"], tf.int32)}


def generator_logits(model, config: PretrainingConfig, batch: Dict[str, tf.Tensor],
                     original: tf.Tensor, masked: masking.MaskedInputs, training: bool
                     ) -> Tuple[tf.Tensor, Optional[tf.Tensor]]:
  """(logits [B, N, V] at the masked positions, a two-tower generator's cloze logits
  [B, S, V] at every position or None) of the generator the config names, over
  `model`'s networks (pretrain/model.py)."""
  if config.uniform_generator:
    return tf.zeros(tf.concat([tf.shape(masked.masked_lm_ids),
                               [model.model_config.vocab_size]], 0)), None
  if model.two_tower is not None:
    # The cloze model reads the unmasked input and predicts every position.
    cloze_logits = model.two_tower(encoder_inputs(batch, original), training=training)
    return tf.gather(cloze_logits, masked.masked_lm_positions, batch_dims=1), cloze_logits
  return model.electra.generator_logits(encoder_inputs(batch, masked.input_ids),
                                        training=training,
                                        positions=masked.masked_lm_positions), None


def masked_lm_outputs(batch: Dict[str, tf.Tensor], masked: masking.MaskedInputs,
                      mlm_logits, token_loss, mlm_loss) -> Dict[str, tf.Tensor]:
  """The generator's half of a step's outputs (pretrain/eval_metrics.py reads them)."""
  return {
      "mlm_loss": mlm_loss,
      "input_ids": masked.input_ids,
      "input_mask": tf.cast(batch["input_mask"], tf.int32),
      "masked_lm_positions": masked.masked_lm_positions,
      "masked_lm_ids": masked.masked_lm_ids,
      "masked_lm_weights": masked.masked_lm_weights,
      "masked_lm_preds": tf.argmax(mlm_logits, -1, output_type=tf.int32),
      "masked_lm_token_loss": token_loss,
  }


class MaskedLM:
  """The objective's step, eval outputs, FLOPs, memory and the parts it trains; the
  networks are PretrainingModel's (pretrain/model.py), passed to each call."""

  name = "masked_lm"  # the config's `objective`
  has_discriminator = False
  exported_part = "generator"  # the part its export holds (model/weights/original.py)

  def __init__(self, config: PretrainingConfig):
    self.config = config
    self.two_tower = config.two_tower_generator  # (PretrainingConfig checks it fits)

  # ---- the step ---------------------------------------------------------------------

  def compute(self, model, batch: Dict[str, tf.Tensor], seed, training: bool,
              step=None) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
    """(this replica's mean loss, outputs: the scalars `logged` reads and the tensors
    pretrain/eval_metrics.py reads); `seed` an int [2] tensor, one per replica."""
    del step  # the masked LM's loss does not change over the run
    mask_seed, _ = tf.unstack(
        tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), 2))
    original, masked = mask_batch(batch, self.config, model.special_tokens, mask_seed)
    mlm_logits, _ = generator_logits(model, self.config, batch, original, masked,
                                     training)
    token_loss, mlm_loss = masked_lm_loss(mlm_logits, masked.masked_lm_ids,
                                          masked.masked_lm_weights)
    outputs = masked_lm_outputs(batch, masked, mlm_logits, token_loss, mlm_loss)
    return self.config.gen_weight * mlm_loss, outputs

  def logged(self, outputs: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
    """The scalars of compute's outputs the training log shows: the losses, then the
    generator's accuracy on the masked tokens."""
    return {"mlm_loss": outputs["mlm_loss"],
            "masked_lm_accuracy": weighted_mean(
                tf.equal(outputs["masked_lm_preds"], outputs["masked_lm_ids"]),
                outputs["masked_lm_weights"])}

  def eval_outputs(self, model, batch: Dict[str, tf.Tensor], seed
                   ) -> Optional[Dict[str, tf.Tensor]]:
    """What eval measures beyond compute's outputs (the discriminator's fixed
    corruption); nothing for the masked LM."""
    del model, batch, seed
    return None

  # ---- what it trains ---------------------------------------------------------------

  def discriminator_variables(self, model) -> list:
    """The variables disc_lr_multiplier scales: none without a discriminator."""
    del model
    return []

  def generator_head(self, model):
    """The head whose softmax the generator samples from (generator_unigram_init)."""
    return model.two_tower.cloze_head if self.two_tower else model.electra.generator_head

  # ---- cost -------------------------------------------------------------------------

  def output_frac(self) -> float:
    """The share of positions the generator's head runs on, as ours runs it."""
    return self.config.max_predictions_per_seq / self.config.max_seq_length

  def forward_flops(self, output_frac: float) -> float:
    """Forward FLOPs on one sequence (model/flops.py's conventions): one full-size
    encoder with the MLM head."""
    model_config, s = self.config.model_config(), self.config.max_seq_length
    return (model_flops.encoder_flops(model_config, s) +
            model_flops.mlm_head_flops(model_config, s, output_frac))

  def flops(self, output_frac: Optional[float] = None) -> model_flops.PretrainingFlops:
    """Training FLOPs per step and per run and inference FLOPs per sequence, counted as
    the original's flops_computation.py; the generator's head on output_frac of the
    positions (default: ours; the original's table used 20 of 128, tests/test_flops.py).
    """
    if output_frac is None:
      output_frac = self.output_frac()
    if not 0 <= output_frac <= 1:
      raise ValueError(f"output_frac {output_frac}: expected a fraction in [0, 1]")
    config = self.config
    return model_flops.PretrainingFlops.of(
        self.forward_flops(output_frac), config.train_batch_size, config.num_train_steps,
        model_flops.inference_flops(config.model_config(), config.max_seq_length))

  def step_memory(self, batch_size: int) -> model_memory.StepMemory:
    config, model_config = self.config, self.config.model_config()
    return (model_memory.encoder_step_memory(model_config, config.max_seq_length,
                                             batch_size, config.recompute) +
            model_memory.mlm_head_step_memory(model_config, model_config.hidden_size,
                                              config.max_predictions_per_seq,
                                              batch_size))
