"""FLOPs of pre-training and inference, counted as the original release counts them.

The original's flops_computation.py (google-research/electra) is the yardstick the paper's
compute figures use, so every term and quirk here follows it, and its printed totals
for ELECTRA-Small/Base/Large and BERT-Small/Base/Large are reproduced exactly
(tests/test_flops.py). Its conventions:
- a matmul of [m, n] by [n] costs 2mn; the backward pass costs as much as the forward,
  so a training step is 2 x batch x the forward FLOPs of one sequence;
- element-wise work has fixed per-unit costs (the constants below); biases and residual
  additions cost one per unit;
- embedding lookups are one-hot matmuls: 2 E V per token for the words, and the
  position and token-type lookups together 2 E (S + type_vocab_size);
- attention is counted dense (S keys per query) whatever its mask, so a causal tower
  costs as much as a bidirectional one;
- the generator's (MLM) head runs on `output_frac` of the positions only; the
  discriminator's head on every position.
Quirks kept so the totals match: the LayerNorm after attention costs a flat 5 per token
(not 5 per unit), and the one-hot output bias of the MLM logits is not counted.
"""

import dataclasses

from model.config import ModelConfig

# Per-unit costs of the element-wise operations, as the original counts them.
DROPOUT = 4  # random number, compare, apply the mask, rescale
LAYER_NORM = 5  # mean, variance (square and sum), scale, shift
ACTIVATION = 8  # GELU in its tanh form
SOFTMAX = 5  # subtract the max, exp, sum, divide


@dataclasses.dataclass(frozen=True)
class PretrainingFlops:
  """A pre-training run's count (each objective's forward is its own: pretrain/
  objectives/); a training step is forward + backward, counted as 2 x forward."""
  train_flops_per_step: float
  train_flops_total: float
  infer_flops_per_sequence: float  # the discriminator's forward over one sequence

  @classmethod
  def of(cls, forward_per_sequence: float, batch_size: int, num_train_steps: float,
         infer_flops_per_sequence: float) -> "PretrainingFlops":
    per_step = 2 * batch_size * forward_per_sequence
    return cls(per_step, per_step * num_train_steps, infer_flops_per_sequence)


def layer_flops(config: ModelConfig, seq_length: int) -> float:
  """Forward FLOPs of one Transformer layer over one sequence."""
  h, i, s = config.hidden_size, config.intermediate_size, seq_length
  heads = config.num_attention_heads
  per_token = (
      3 * (2 * h * h + h)  # query, key and value projections with biases
      + 2 * h * s  # scores against every key
      + (SOFTMAX + DROPOUT + 1) * heads * s  # softmax, dropout and scaling of the scores
      + 2 * h * s  # weighted average of the values
      + 2 * h * h + h + (DROPOUT + 1) * h  # output projection, bias, dropout, residual
      + LAYER_NORM  # flat, as the original counts it (quirk)
      + 2 * h * i + i + ACTIVATION * i  # intermediate dense, bias, GELU
      + 2 * i * h + h + (DROPOUT + 1 + LAYER_NORM) * h)  # output dense ... LayerNorm
  return per_token * s


def embedding_flops(config: ModelConfig, seq_length: int) -> float:
  """Forward FLOPs of the input embeddings (and their projection to H) over a sequence."""
  e, h, s = config.embedding_width, config.hidden_size, seq_length
  per_token = (2 * e * config.vocab_size  # word lookup as a one-hot matmul
               + 2 * e * (s + config.type_vocab_size)  # position and token-type lookups
               + 2 * e  # adding the three
               + (LAYER_NORM + DROPOUT) * e)
  if e != h:
    per_token += 2 * e * h + h  # embeddings_project
  return per_token * s


def encoder_flops(config: ModelConfig, seq_length: int) -> float:
  return (config.num_hidden_layers * layer_flops(config, seq_length) +
          embedding_flops(config, seq_length))


def mlm_head_flops(config: ModelConfig, seq_length: int, output_frac: float,
                   input_width: int = 0) -> float:
  """The generator head on output_frac of the positions: dense to E, GELU, LayerNorm,
  logits against the embedding table, softmax, picking the target's probability.
  `input_width` is the width of what it reads (default H)."""
  e, v = config.embedding_width, config.vocab_size
  per_token = (2 * (input_width or config.hidden_size) * e + e
               + (ACTIVATION + LAYER_NORM) * e + 2 * e * v + (SOFTMAX + 2) * v)
  return output_frac * per_token * seq_length


def discriminator_head_flops(config: ModelConfig, seq_length: int) -> float:
  """Dense H -> H with bias and GELU, then a one-unit logit, at every position."""
  h = config.hidden_size
  return (2 * h * h + h + ACTIVATION * h + 2 * h) * seq_length


def inference_flops(config: ModelConfig, seq_length: int) -> float:
  """The discriminator's forward over one sequence with a per-token binary head: the
  original's "infer" count, the cost of running the fine-tuned encoder."""
  return encoder_flops(config, seq_length) + discriminator_head_flops(config, seq_length)


def finetuning_flops_per_step(config: ModelConfig, seq_length: int,
                              batch_size: int) -> float:
  """Training FLOPs of one fine-tuning step, in the original's convention (forward +
  backward = 2 x forward): the encoder, with the per-token discriminator head standing
  in for the task heads (a few units on [CLS] or on each word; noise beside the
  encoder)."""
  return 2 * batch_size * inference_flops(config, seq_length)


def encoder_parameters(config: ModelConfig, own_embeddings: bool = True) -> int:
  """Weights of an encoder (no head); without own_embeddings, those beyond the shared
  embedding layer (the tied generator's case)."""
  e, h, i = config.embedding_width, config.hidden_size, config.intermediate_size
  count = config.num_hidden_layers * (4 * (h * h + h) + 2 * h * i + i + h + 4 * h)
  if own_embeddings:
    count += (config.vocab_size + config.max_position_embeddings +
              config.type_vocab_size + 2) * e
  if e != h:
    count += e * h + h
  return count
