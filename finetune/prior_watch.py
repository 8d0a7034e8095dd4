"""A line for a fine-tuning run that has not left the label prior.

An encoder pre-trained briefly can hold fine-tuning at the loss of predicting the label
frequencies for hundreds of steps, where random weights leave it within a hundred
(docs/cpu_recipe.md, "A pre-trained encoder that fine-tunes worse than random
weights"). The run then ends at the majority class (a regression: at the mean label)
and its score looks like a bad task or a bug. PriorWatch compares the training loss with
that prior's loss and says so once, with what it measured and the option that helps.
"""

import sys
from typing import Dict, List, Tuple

import numpy as np

# Checked when these shares of the run's steps have run, the first not before
# FIRST_CHECK_STEP (random weights of the tiny size are still near the prior at step
# ~60-100 at the tiny preset's rate, and leave it by ~100-150; a briefly pre-trained
# encoder sits there for 200-250: docs/cpu_recipe.md); the mean loss over the latest
# WINDOW_SHARE of the run's steps is compared with the prior's loss.
CHECK_AT = (0.5, 1.0)
FIRST_CHECK_STEP = 150
WINDOW_SHARE = 0.25
MIN_WINDOW = 10
# "At the prior": not below its loss by more than this share of it. Training losses
# of one batch scatter by a few percent around their mean; a run that learns is below
# this by its last quarter (RESULTS: random weights on 4,000 SST-2 examples).
TOLERANCE = 0.02
# The baseline's words (its name, what it predicts): a classification's label
# frequencies, a regression's mean label (no classes), and several tasks' mix of both.
CLASSES = ("label prior", "the training labels' frequencies")
REGRESSION = ("label mean", "the training labels' mean")
MIXED = ("label prior", "each task's training label frequencies (a regression's mean)")


class PriorWatch:
  """Called after every training step (LoopSettings.on_step) with the step's scalars;
  prints one line the first time a check finds the loss at the prior's."""

  def __init__(self, prior_loss: float, num_steps: int, remedy: str, out=None,
               baseline: Tuple[str, str] = CLASSES):
    """`baseline`: (its name, what it predicts), as CLASSES or REGRESSION word it."""
    self.prior_loss, self.num_steps, self.remedy, self.out = prior_loss, num_steps, \
        remedy, out
    self.baseline = baseline
    self.window = max(MIN_WINDOW, round(num_steps * WINDOW_SHARE))
    self.checks = sorted({num_steps} | {
        step for step in (round(num_steps * s) for s in CHECK_AT)
        if max(self.window, FIRST_CHECK_STEP) <= step <= num_steps})
    self.losses: List[float] = []  # this process's steps only (a resumed run restarts)
    self.said = False

  def __call__(self, step: int, scalars: Dict[str, object]):
    self.losses.append(float(scalars["mean_loss"]))
    if self.said or step not in self.checks or len(self.losses) < self.window:
      return
    mean = float(np.mean(self.losses[-self.window:]))
    if mean >= self.prior_loss * (1 - TOLERANCE):
      self.said = True
      name, predicted = self.baseline
      print(f"note: after {step} of {self.num_steps} steps the training loss is still at "
            f"the {name}'s (mean {mean:.4g} over the last {self.window} steps; "
            f"predicting {predicted} scores {self.prior_loss:.4g}):"
            f" the encoder has not started on the task; {self.remedy}",
            file=self.out or sys.stderr, flush=True)
