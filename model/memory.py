"""Memory of a training step, estimated from the sizes before the first step runs.

A step too big for the machine otherwise shows as a process killed by the OS (or by an
address-space cap) with no message, or as minutes of silence in the first call; the
run checks this estimate against what the machine has first (training/runtime.py).

The count is of float32 tensors a training step holds at its peak: what each layer
keeps for the backward pass, the attention's [heads, S, S] tensors, the MLM head's
logits, and per weight its value, gradient and two Adam slots. Calibrated on
electra_small at 128 tokens against the measured peak's growth per sequence
(bench/RESULTS.md, "Figures moved from code comments").
"""

import dataclasses

from model.config import ModelConfig
from model.flops import encoder_parameters

FLOAT_BYTES = 4
# Kept per token and layer for the backward pass, in tensors of the hidden size: the
# layer's input, query, key, value, the attention's context, output projection, dropout
# mask and residual sum, LayerNorm's normalized values and output, the FFN's output and
# its residual sum.
HIDDEN_TENSORS = 12
INTERMEDIATE_TENSORS = 2  # the FFN's input to GELU and its output
ATTENTION_TENSORS = 3  # per head and key: the scores, probabilities and dropout mask
MLM_HEAD_TENSORS = 3  # per masked position and vocabulary entry: logits, softmax, gradient
BYTES_PER_PARAMETER = 4 * FLOAT_BYTES  # the weight, its gradient, Adam's two slots
# What TensorFlow itself takes besides, as measured for electra_small
# (bench/RESULTS.md, "Figures moved from code comments").
RUNTIME_BYTES = 1 << 30


@dataclasses.dataclass(frozen=True)
class StepMemory:
  """Bytes of one training step (one micro-batch of one replica)."""
  activations: float  # attention included
  attention: float  # the [heads, S, S] tensors alone
  weights: float  # values, gradients and optimizer slots

  runtime: float = RUNTIME_BYTES  # TensorFlow itself, once per process

  def __add__(self, other: "StepMemory") -> "StepMemory":
    return StepMemory(self.activations + other.activations,
                      self.attention + other.attention, self.weights + other.weights)


def encoder_step_memory(config: ModelConfig, seq_length: int, batch_size: int,
                        recompute: bool = False, own_embeddings: bool = True
                        ) -> StepMemory:
  """One encoder's training step on batch_size sequences of seq_length tokens. With
  `recompute` each layer keeps only its input and one layer's activations live at a
  time."""
  h, s = config.hidden_size, seq_length
  tokens = batch_size * s
  attention = ATTENTION_TENSORS * config.num_attention_heads * s * tokens * FLOAT_BYTES
  layer = (HIDDEN_TENSORS * h + INTERMEDIATE_TENSORS * config.intermediate_size
           ) * tokens * FLOAT_BYTES + attention
  layers = config.num_hidden_layers
  kept = (layers * h * tokens * FLOAT_BYTES + layer) if recompute else layers * layer
  embeddings = 3 * config.embedding_width * tokens * FLOAT_BYTES
  return StepMemory(activations=kept + embeddings,
                    attention=attention if recompute else layers * attention,
                    weights=BYTES_PER_PARAMETER * encoder_parameters(config,
                                                                     own_embeddings))


def mlm_head_step_memory(config: ModelConfig, input_width: int, positions: int,
                         batch_size: int) -> StepMemory:
  """An MLM head reading `input_width` units at `positions` positions per sequence: its
  [positions, vocabulary] logits, and its dense and output bias weights."""
  return StepMemory(
      MLM_HEAD_TENSORS * config.vocab_size * positions * batch_size * FLOAT_BYTES, 0.0,
      BYTES_PER_PARAMETER * (input_width * input_width + config.vocab_size))
