"""ELECTRA's replaced-token detection (`objective: electra`, the default; the paper's
section 2).

Loss = gen_weight * generator loss + disc_weight * the discriminator's sigmoid loss over
real tokens. New levers, off by default: disc_weight_ramp_steps (the discriminator's
weight ramped from 0), disc_lr_multiplier (its variables' rate; pretrain/trainer.py),
disc_prior_init.
"""

from typing import Dict, Optional, Tuple

import tensorflow as tf

from data_prep import masking
from model import flops as model_flops
from model import memory as model_memory
from pretrain.objectives.losses import (corrupt, discriminator_loss, fixed_corruption,
                                        gumbel_sample, masked_lm_loss, weighted_mean)
from pretrain.objectives.masked_lm import (MaskedLM, encoder_inputs, generator_logits,
                                           mask_batch, masked_lm_outputs, original_ids)


class Electra(MaskedLM):
  """Generator + discriminator, the discriminator trained to spot replaced tokens."""

  name = "electra"
  has_discriminator = True
  # A correct sample counts as original (Electric labels every masked position).
  every_masked_is_fake = False

  @property
  def exported_part(self) -> str:
    # A two-tower generator is not the pair's: only the discriminator is exported.
    return "discriminator" if self.two_tower else "pair"

  @property
  def replaced_prior(self) -> Optional[float]:
    """The base rate disc_prior_init starts the discriminator's head at."""
    return self.config.mask_prob

  # ---- the step ---------------------------------------------------------------------

  def compute(self, model, batch: Dict[str, tf.Tensor], seed, training: bool,
              step=None) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
    config = self.config
    mask_seed, sample_seed = tf.unstack(
        tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), 2))
    # The generator's half: mask, predict the masked tokens, the masked-LM loss.
    original, masked = mask_batch(batch, config, model.special_tokens, mask_seed)
    mlm_logits, cloze_logits = generator_logits(model, config, batch, original, masked,
                                                training)
    token_loss, mlm_loss = masked_lm_loss(mlm_logits, masked.masked_lm_ids,
                                          masked.masked_lm_weights)
    outputs = masked_lm_outputs(batch, masked, mlm_logits, token_loss, mlm_loss)
    generator_loss = mlm_loss
    if cloze_logits is not None:  # a two-tower generator learns every candidate token
      candidates = masking.candidates_mask(original, outputs["input_mask"],
                                           model.special_tokens)
      _, generator_loss = masked_lm_loss(cloze_logits, original, candidates)
      outputs["cloze_loss"] = generator_loss
    # The discriminator's half: sample, write the samples in, spot them.
    sampled = gumbel_sample(
        mlm_logits, sample_seed, config.temperature,
        disallow_ids=masked.masked_lm_ids if config.disallow_correct else None)
    corrupted, labels = corrupt(original, masked.masked_lm_positions, sampled,
                                masked.masked_lm_weights,
                                every_masked_is_fake=self.every_masked_is_fake)
    disc_logits = model.electra.discriminator_logits(encoder_inputs(batch, corrupted),
                                                     training=training)
    disc_logits += self.logit_offset(cloze_logits, corrupted)
    example_loss, disc_loss = discriminator_loss(disc_logits, labels,
                                                 outputs["input_mask"])
    outputs.update({
        "disc_loss": disc_loss,
        "sampled_ids": sampled,
        "corrupted_ids": corrupted,
        "disc_logits": disc_logits,
        "disc_probs": tf.sigmoid(disc_logits),
        "disc_preds": tf.cast(disc_logits > 0, tf.int32),
        "disc_labels": labels,
        "disc_example_loss": example_loss,
    })
    return (config.gen_weight * generator_loss +
            self.disc_weight(step) * disc_loss), outputs

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

  def logged(self, outputs: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
    """The generator's losses, the discriminator's, then the accuracies of both."""
    losses = {name: outputs[name] for name in ("mlm_loss", "cloze_loss", "disc_loss")
              if name in outputs}
    return {**losses, **super().logged(outputs),
            "disc_accuracy": weighted_mean(
                tf.equal(outputs["disc_preds"], tf.cast(outputs["disc_labels"], tf.int32)),
                outputs["input_mask"])}

  def eval_outputs(self, model, batch: Dict[str, tf.Tensor], seed
                   ) -> Dict[str, tf.Tensor]:
    """The discriminator on `fixed_corruption` of the batch (`seed` fixed per batch, not
    per run): "fixed_logits", "fixed_labels" and "fixed_weights" (the candidates) [B, S],
    and for how alike its token states are, "state_sum" [H] (the sum of the candidates'
    unit-length final states) and "state_count" (pretrain/eval_metrics.py)."""
    corrupted, labels, candidates = fixed_corruption(
        original_ids(batch), tf.cast(batch["input_mask"], tf.int32),
        model.special_tokens, seed)
    inputs = encoder_inputs(batch, corrupted)
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
