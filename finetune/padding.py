"""Batches cut to their longest example: fine-tuning, evaluation and --predict compute on
the tokens that exist, not on max_seq_length's padding.

A batch keeps the first L positions of its token features, L its longest example's
tokens rounded up to a multiple of batch_length_multiple (so a run meets a few lengths,
each compiled once), at most max_seq_length. What is cut is padding only: the encoder
masks it and the heads read the positions that hold tokens, so the outputs equal the
padded batch's within float rounding; dropout counts its units at max_seq_length
(model/dropout.py use_padded_length) and drops the same ones. numpy only: the exported
models' readers ship it.
"""

from typing import Dict, Iterable

import numpy as np

# The features every family has with a token axis.
TOKEN_FEATURES = ("input_ids", "input_mask", "segment_ids")


def batch_lengths(token_counts: np.ndarray, multiple: int, max_length: int) -> np.ndarray:
  """Each row's (a batch's examples') length: its largest token count rounded up to a
  multiple of `multiple`, at most max_length; max_length everywhere when multiple is 0."""
  longest = np.asarray(token_counts).max(-1)
  if not multiple:
    return np.full(longest.shape, max_length, np.int32)
  return np.minimum(max_length, -(-longest // multiple) * multiple).astype(np.int32)


def grouped_by_length(order: np.ndarray, counts: np.ndarray, batch_size: int,
                      window: int, seed: int) -> np.ndarray:
  """`order` (whole batches, epochs of len(counts) examples) regrouped: each run of
  `window` batches sorted by token count, cut into batches again and those shuffled. A
  run never crosses an epoch's end (a batch across it stays as it is), so each epoch
  still holds every example once."""
  rng = np.random.default_rng(seed)
  batches = order.reshape(-1, batch_size)
  starts = np.arange(len(batches)) * batch_size
  across = starts // len(counts) != (starts + batch_size - 1) // len(counts)
  grouped, run = [], []

  def flush():
    if run:
      part = np.concatenate(run)
      part = part[np.argsort(counts[part], kind="stable")].reshape(-1, batch_size)
      grouped.append(part[rng.permutation(len(part))])
      run.clear()

  for batch, is_across in zip(batches, across):
    if is_across:
      flush()
      grouped.append(batch[None])
      continue
    run.append(batch)
    if len(run) == window:
      flush()
  flush()
  return np.concatenate(grouped).reshape(-1)


def token_counts(features: Dict[str, np.ndarray]) -> np.ndarray:
  """Each feature's tokens ([CLS] and [SEP] included)."""
  return features["input_mask"].sum(-1)


def cut(batch: Dict[str, np.ndarray], length: int, keys: Iterable[str]):
  """The batch with its `keys` features cut to `length` positions."""
  keys = set(keys)
  return {k: v[:, :length] if k in keys else v for k, v in batch.items()}


def cut_to_longest(features: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
  """The features (every one with a token axis) cut to their longest example's."""
  return cut(features, int(token_counts(features).max(initial=0)), features)


def pad_tokens(array: np.ndarray, max_length: int, value: float = 0) -> np.ndarray:
  """A token-axis output (axis 1) of a cut batch padded back to max_length with `value`
  (which a reader of the outputs skips, or ranks last), so that batches concatenate."""
  widths = [(0, 0)] * array.ndim
  widths[1] = (0, max_length - array.shape[1])
  return np.pad(array, widths, constant_values=value)
