"""What the loop shows and keeps of its steps: the progress line, TensorBoard's scalars
and the JSON-lines log (training/curves.py draws it), with tokens/s and FLOP/s."""

import time
from typing import Dict, Optional

import tensorflow as tf

from runs import model_files
from runs.model_files import LOG_NAME, TRAIN_BOARD
from util import cpu
from util.progress import Progress, format_duration

# A first step expected to run longer than this gets a line before it: nothing else is
# printed until it ends. Its time is reckoned at half the devices' peak FLOP/s, which
# CPUs rarely reach, so the figure is a floor.
LONG_FIRST_STEP_SECONDS = 60
FIRST_STEP_PEAK_FRACTION = 0.5


def first_step_note(flops_per_step: float, peak_flops: float) -> Optional[str]:
  if not flops_per_step or not peak_flops:
    return None
  seconds = flops_per_step / (FIRST_STEP_PEAK_FRACTION * peak_flops)
  if seconds < LONG_FIRST_STEP_SECONDS:
    return None
  return (f"note: one training step is {flops_per_step:.2g} FLOPs: the first takes at "
          f"least {format_duration(seconds)} on these devices (and compiles first); no "
          "line comes before it ends")


class StepLog:
  """The log of one run() from step `start`, on the chief (elsewhere only the values)."""

  def __init__(self, settings, start: int, chief: bool):
    self.settings, self.chief = settings, chief
    self.progress = Progress(settings.label, settings.num_train_steps, "steps",
                             start=start, interval=0)
    self.writer = (model_files.summary_writer(settings.model_dir, TRAIN_BOARD)
                   if chief else tf.summary.create_noop_writer())

  def first_step_done(self, step: int):
    """Rates from here on: the first step includes tracing."""
    self.progress.start_count, self.progress.t0 = step, time.time()

  def write(self, step: int, scalars: Dict[str, tf.Tensor]) -> Dict[str, float]:
    settings = self.settings
    values = {k: float(v.numpy()) for k, v in scalars.items()}
    if settings.learning_rate is not None:
      values["learning_rate"] = float(settings.learning_rate(step))
    if not self.chief:
      return values
    self.progress.done = step
    rate = self.progress.rate()
    extra = {k: f"{v:.4g}" for k, v in values.items() if k != "grad_norm"}
    if settings.tokens_per_step:
      extra["tokens/s"] = f"{rate * settings.tokens_per_step:,.0f}"
    if settings.flops_per_step:
      # Logged, not only printed: FLOP/s compares runs across hardware and model sizes.
      values["train_flops"] = step * settings.flops_per_step
      values["flops_per_s"] = rate * settings.flops_per_step
      extra["FLOPs"] = f"{values['train_flops']:.2e}"
      extra["GFLOP/s"] = f"{values['flops_per_s'] / 1e9:.3g}"
      fraction = cpu.peak_fraction(values["flops_per_s"], settings.peak_flops)
      if fraction is not None:
        values["peak_fraction"] = fraction
        extra["of peak"] = f"{fraction:.0%}"
      elif settings.peak_flops:  # a rate past it: the peak is wrong
        extra["peak"] = "unknown"
    self.progress.update(step, extra, force=True)
    with self.writer.as_default(step=step):
      for name, value in values.items():
        tf.summary.scalar(name, value)
    model_files.append_row(settings.model_dir, LOG_NAME, {"step": step, **values})
    return values
