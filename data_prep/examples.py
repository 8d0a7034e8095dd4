"""Example packing: lines of token ids -> fixed-length [CLS] A [SEP] (B [SEP]) examples.

The rules are the original's build_pretraining_dataset.py's: lines accumulate until their
length reaches the target length or the document ends; 10% of examples have a single
segment; a line joins segment A if A is empty, if it keeps A under its target, or (50%)
if B is still empty and A is under target; A is cut to max-2 tokens, B to what is left;
after each example the next target is, 5% of the time, uniform in [5, max].
Randomness comes from the `random.Random` given, so a seed fixes the result.
"""

import random
from typing import List, Optional

SINGLE_SEGMENT_PROB = 0.1
SHORT_TARGET_PROB = 0.05
UNBOUNDED = 100000


class Example:
  """One packed example: input ids (max_seq_length of them); [0, a_end) are [CLS] A
  [SEP] (segment 0), [a_end, num_real) B [SEP] (segment 1, maybe empty), then padding."""

  __slots__ = ("input_ids", "a_end", "num_real", "num_dropped")

  def __init__(self, input_ids, a_end, num_real, num_dropped):
    self.input_ids, self.a_end, self.num_real = input_ids, a_end, num_real
    self.num_dropped = num_dropped  # tokens cut by truncation


class ExampleBuilder:
  """Feed it lines with `add_line`; it returns an Example whenever one is complete."""

  def __init__(self, max_length: int, cls_id: int, sep_id: int, rng: random.Random):
    if max_length < 5:
      raise ValueError(f"--max-seq-length: {max_length} is too small; at least 5")
    self.max_length = max_length
    self.cls_id, self.sep_id = cls_id, sep_id
    self.rng = rng
    self.target_length = max_length
    self.lines: List[List[int]] = []
    self.length = 0
    self.single_segment = self.short_target = 0  # counts, for the summary

  def add_line(self, ids: List[int]) -> Optional[Example]:
    """Adds one non-blank line's ids (which may be none, e.g. only control characters)."""
    self.lines.append(ids)
    self.length += len(ids)
    return self._build() if self.length >= self.target_length else None

  def end_document(self) -> Optional[Example]:
    return self._build() if self.length else None

  def _build(self) -> Example:
    rng = self.rng
    if rng.random() < SINGLE_SEGMENT_PROB:
      first_target = UNBOUNDED
    else:
      first_target = (self.target_length - 3) // 2  # room for [CLS] and two [SEP]
    first, second = [], []
    for line in self.lines:
      # The 50% draw happens only when the first two conditions fail, as in the original
      # (the draws must line up for the same seed to give the same examples).
      if (not first or len(first) + len(line) < first_target or
          (not second and len(first) < first_target and rng.random() < 0.5)):
        first += line
      else:
        second += line
    total = len(first) + len(second)
    first = first[:self.max_length - 2]
    second = second[:max(0, self.max_length - len(first) - 3)]
    self.lines, self.length = [], 0
    if rng.random() < SHORT_TARGET_PROB:
      self.target_length = rng.randint(5, self.max_length)
      self.short_target += 1
    else:
      self.target_length = self.max_length
    input_ids = [self.cls_id] + first + [self.sep_id]
    a_end = len(input_ids)
    if second:
      input_ids += second + [self.sep_id]
    else:
      self.single_segment += 1
    num_real = len(input_ids)
    return Example(input_ids + [0] * (self.max_length - num_real), a_end, num_real,
                   total - len(first) - len(second))
