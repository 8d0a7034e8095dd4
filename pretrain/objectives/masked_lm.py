"""BERT's masked LM (`objective: masked_lm`; the original's `electra_objective: false`),
and the generator step every objective starts with.

One full-size encoder predicts the masked tokens; there is no discriminator, and the
encoder is saved as the pair's generator. ELECTRA and Electric (electra.py, electric.py)
extend this class: its generator step (mask, generator logits at the masked positions,
masked-LM loss) is theirs too, with the generator the config names: the pair's (a
smaller encoder sharing the embeddings), a uniform one (all logits zero) or Electric's
two-tower cloze model.
"""

import collections
from typing import Dict, Optional, Tuple

import tensorflow as tf

from data_prep import masking
from model import flops as model_flops
from model import memory as model_memory
from pretrain.config import PretrainingConfig
from pretrain.objectives.losses import masked_lm_loss

# What the generator step gives the discriminator's: the masking, the generator's logits
# at the masked positions (and a two-tower generator's at every position), the seed left
# for sampling, and the step's loss and outputs so far.
GeneratorStep = collections.namedtuple("GeneratorStep", [
    "original_ids", "masked", "mlm_logits", "cloze_logits", "sample_seed",
    "encoder_inputs", "loss", "outputs"])


class MaskedLM:
  """The objective's loss, eval outputs, FLOPs, memory and the parts it trains; the
  networks are PretrainingModel's (pretrain/model.py), passed to each call."""

  name = "masked_lm"  # the config's `objective`
  has_discriminator = False
  exported_part = "generator"  # the part its export holds (model/weights/original.py)

  def __init__(self, config: PretrainingConfig):
    self.config = config
    self.two_tower = config.two_tower_generator  # (PretrainingConfig checks it fits)

  def logged_losses(self) -> tuple:
    """The names of compute's outputs the training log shows as losses."""
    return ("mlm_loss", "cloze_loss") if self.two_tower else ("mlm_loss",)

  # ---- the loss ---------------------------------------------------------------------

  def generator_step(self, model, batch: Dict[str, tf.Tensor], seed,
                     training: bool) -> GeneratorStep:
    """Masks the batch and runs the generator; `seed` is an int [2] tensor."""
    config = self.config
    mask_seed, sample_seed = tf.unstack(
        tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), 2))
    original_ids, masked = model.mask(batch, mask_seed)
    input_mask = tf.cast(batch["input_mask"], tf.int32)
    segment_ids = tf.cast(batch["segment_ids"], tf.int32)

    def encoder_inputs(ids):
      return {"input_ids": ids, "input_mask": input_mask, "segment_ids": segment_ids}

    outputs, cloze_logits = {}, None
    if config.uniform_generator:
      mlm_logits = tf.zeros(tf.concat([tf.shape(masked.masked_lm_ids),
                                       [model.model_config.vocab_size]], 0))
    elif model.two_tower is not None:
      # The cloze model reads the unmasked input and predicts every position.
      cloze_logits = model.two_tower(encoder_inputs(original_ids), training=training)
      mlm_logits = tf.gather(cloze_logits, masked.masked_lm_positions, batch_dims=1)
      candidates = masking.candidates_mask(original_ids, input_mask,
                                           model.special_tokens)
      _, outputs["cloze_loss"] = masked_lm_loss(cloze_logits, original_ids, candidates)
    else:
      mlm_logits = model.electra.generator_logits(
          encoder_inputs(masked.input_ids), training=training,
          positions=masked.masked_lm_positions)
    token_loss, outputs["mlm_loss"] = masked_lm_loss(mlm_logits, masked.masked_lm_ids,
                                                     masked.masked_lm_weights)
    outputs.update({
        "input_ids": masked.input_ids,
        "input_mask": input_mask,
        "masked_lm_positions": masked.masked_lm_positions,
        "masked_lm_ids": masked.masked_lm_ids,
        "masked_lm_weights": masked.masked_lm_weights,
        "masked_lm_preds": tf.argmax(mlm_logits, -1, output_type=tf.int32),
        "masked_lm_token_loss": token_loss,
    })
    loss = config.gen_weight * outputs.get("cloze_loss", outputs["mlm_loss"])
    return GeneratorStep(original_ids, masked, mlm_logits, cloze_logits, sample_seed,
                         encoder_inputs, loss, outputs)

  def compute(self, model, batch: Dict[str, tf.Tensor], seed, training: bool,
              step=None) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
    """(loss, outputs) of one per-replica batch (PretrainingModel.compute says more)."""
    del step  # the masked LM's loss does not change over the run
    generated = self.generator_step(model, batch, seed, training)
    return generated.loss, generated.outputs

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
    positions (default: ours; the original's table used model_flops.ORIGINAL_OUTPUT_FRAC).
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
    """Memory of a training step on batch_size sequences (model/memory.py)."""
    config, model_config = self.config, self.config.model_config()
    return (model_memory.encoder_step_memory(model_config, config.max_seq_length,
                                             batch_size, config.recompute) +
            model_memory.mlm_head_step_memory(model_config, model_config.hidden_size,
                                              config.max_predictions_per_seq,
                                              batch_size))
