"""ELECTRA's replaced-token detection (`objective: electra`, the default; the paper's
section 2).

After the generator step (masked_lm.py): Gumbel-max samples (no gradient) written into
the unmasked input -> discriminator logits over every token -> sigmoid loss over real
tokens; loss = gen_weight * generator loss + disc_weight * discriminator loss. New
levers, off by default: disc_weight_ramp_steps (the discriminator's weight ramped from
0), disc_lr_multiplier (its variables' rate; pretrain/trainer.py), disc_prior_init.
"""

from typing import Dict, Optional, Tuple

import tensorflow as tf

from model import flops as model_flops
from model import memory as model_memory
from pretrain.objectives.losses import (corrupt, discriminator_loss, fixed_corruption,
                                        gumbel_sample)
from pretrain.objectives.masked_lm import MaskedLM


class Electra(MaskedLM):
  """Generator + discriminator, the discriminator trained to spot replaced tokens."""

  name = "electra"
  has_discriminator = True
  # A correct sample counts as original (Electric labels every masked position).
  every_masked_is_fake = False

  def logged_losses(self) -> tuple:
    return super().logged_losses() + ("disc_loss",)

  @property
  def exported_part(self) -> str:
    # A two-tower generator is not the pair's: only the discriminator is exported.
    return "discriminator" if self.two_tower else "pair"

  @property
  def replaced_prior(self) -> Optional[float]:
    """The base rate disc_prior_init starts the discriminator's head at."""
    return self.config.mask_prob

  # ---- the loss ---------------------------------------------------------------------

  def disc_weight(self, step=None) -> tf.Tensor:
    """The discriminator loss's weight at training step `step` (the full weight when
    None, as in evaluation)."""
    config = self.config
    if step is None or not config.disc_weight_ramp_steps:
      return tf.constant(config.disc_weight, tf.float32)
    ramp = tf.cast(step, tf.float32) / config.disc_weight_ramp_steps
    return config.disc_weight * tf.minimum(ramp, 1.0)

  def logit_offset(self, cloze_logits, corrupted_ids):
    """What the discriminator's logits get added (Electric's energy correction)."""
    del cloze_logits, corrupted_ids
    return 0.0

  def compute(self, model, batch: Dict[str, tf.Tensor], seed, training: bool,
              step=None) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
    config = self.config
    generated = self.generator_step(model, batch, seed, training)
    masked, outputs = generated.masked, generated.outputs
    sampled = gumbel_sample(
        generated.mlm_logits, generated.sample_seed, config.temperature,
        disallow_ids=masked.masked_lm_ids if config.disallow_correct else None)
    corrupted, labels = corrupt(generated.original_ids, masked.masked_lm_positions,
                                sampled, masked.masked_lm_weights,
                                every_masked_is_fake=self.every_masked_is_fake)
    disc_logits = model.electra.discriminator_logits(generated.encoder_inputs(corrupted),
                                                     training=training)
    disc_logits += self.logit_offset(generated.cloze_logits, corrupted)
    example_loss, outputs["disc_loss"] = discriminator_loss(disc_logits, labels,
                                                            outputs["input_mask"])
    outputs.update({
        "sampled_ids": sampled,
        "corrupted_ids": corrupted,
        "disc_logits": disc_logits,
        "disc_probs": tf.sigmoid(disc_logits),
        "disc_preds": tf.cast(disc_logits > 0, tf.int32),
        "disc_labels": labels,
        "disc_example_loss": example_loss,
    })
    return generated.loss + self.disc_weight(step) * outputs["disc_loss"], outputs

  def eval_outputs(self, model, batch: Dict[str, tf.Tensor], seed
                   ) -> Dict[str, tf.Tensor]:
    """The discriminator on `fixed_corruption` of the batch (`seed` fixed per batch, not
    per run): "fixed_logits", "fixed_labels" and "fixed_weights" (the candidates) [B, S],
    and for how alike its token states are, "state_sum" [H] (the sum of the candidates'
    unit-length final states) and "state_count" (pretrain/eval_metrics.py)."""
    input_mask = tf.cast(batch["input_mask"], tf.int32)
    corrupted, labels, candidates = fixed_corruption(
        model.original_ids(batch), input_mask, model.special_tokens, seed)
    inputs = {"input_ids": corrupted, "input_mask": input_mask,
              "segment_ids": tf.cast(batch["segment_ids"], tf.int32)}
    hidden = model.electra.discriminator(inputs, training=False)
    logits = model.electra.discriminator_logits(inputs, hidden=hidden)
    states = tf.boolean_mask(tf.math.l2_normalize(tf.cast(hidden, tf.float32), -1),
                             candidates)
    return {"fixed_logits": tf.cast(logits, tf.float32), "fixed_labels": labels,
            "fixed_weights": tf.cast(candidates, tf.float32),
            "state_sum": tf.reduce_sum(states, 0),
            "state_count": tf.shape(states)[0]}

  # ---- what it trains ---------------------------------------------------------------

  def discriminator_variables(self, model) -> list:
    """Every variable the discriminator reads: its encoder (the embeddings it shares
    with the generator included) and its head."""
    return list(model.electra.discriminator.trainable_variables) + list(
        model.electra.discriminator_head.trainable_variables)

  # ---- cost -------------------------------------------------------------------------

  @property
  def generator_towers(self) -> int:
    """Encoders the generator runs (a two-tower generator's are left- and right-to-left
    at the generator's size)."""
    return 2 if self.two_tower else 1

  def forward_flops(self, output_frac: float) -> float:
    """The discriminator with its head, plus the generator: the pair's with its MLM head
    on output_frac of the positions (the shared embedding lookup counted in each
    network, as each performs it; the full-size encoder again when untied_generator is
    false, as the original runs it), nothing for a uniform generator (constant logits),
    or two towers (each a full encoder: attention is counted dense) whose outputs,
    concatenated (2 H), feed the head at every position."""
    model_config, s = self.config.model_config(), self.config.max_seq_length
    generator = model_config.generator_config()
    total = model_flops.inference_flops(model_config, s)
    if self.two_tower:
      return total + 2 * model_flops.encoder_flops(generator, s) + (
          model_flops.mlm_head_flops(generator, s, 1.0,
                                     input_width=2 * generator.hidden_size))
    if self.config.uniform_generator:
      return total
    return total + model_flops.encoder_flops(generator, s) + (
        model_flops.mlm_head_flops(generator, s, output_frac))

  def step_memory(self, batch_size: int) -> model_memory.StepMemory:
    config, model_config = self.config, self.config.model_config()
    generator = model_config.generator_config()
    s = config.max_seq_length
    memory = model_memory.encoder_step_memory(model_config, s, batch_size,
                                              config.recompute)
    if model_config.untied_generator:  # else the discriminator's encoder is it too
      for _ in range(self.generator_towers):
        memory += model_memory.encoder_step_memory(
            generator, s, batch_size, config.recompute,
            own_embeddings=model_config.untied_generator_embeddings)
    positions = s if self.two_tower else config.max_predictions_per_seq
    return memory + model_memory.mlm_head_step_memory(
        model_config, generator.hidden_size * self.generator_towers, positions,
        batch_size)
