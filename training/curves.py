"""The training log (JSON lines) and the PNG panels drawn from it."""

import json
import math
import os
from typing import Dict, Optional

from util import files

LOG_NAME = "train_log.jsonl"
CURVES_NAME = "training_curves.png"
EVAL_LOG_NAME = "eval_curve.jsonl"  # one row per evaluated checkpoint, by global_step


def read_log(path: str, step_key: str = "step") -> Dict[int, Dict[str, float]]:
  """step -> scalars; a step logged twice (redone after a resume) keeps the last entry."""
  entries = {}
  if os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      for line in f:
        if line.strip():
          entry = json.loads(line)
          entries[entry.pop(step_key)] = entry
  return dict(sorted(entries.items()))


def plot_panels(panels: Dict[str, Dict[str, list]], xlabel: str, png_path: str,
                columns: int = 3) -> Optional[str]:
  """One panel per name, one line per series label ("" for a single unlabeled line);
  `panels` is {name: {label: [(x, y), ...]}}. Written atomically; returns the path."""
  panels = {name: series for name, series in panels.items()
            if any(points for points in series.values())}
  if not panels:
    return None
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  cols = min(columns, len(panels))
  rows = math.ceil(len(panels) / cols)
  fig, axes = plt.subplots(rows, cols, figsize=(4.5 * cols, 3 * rows), squeeze=False)
  for ax, (name, series) in zip(axes.flat, sorted(panels.items())):
    for label, points in series.items():
      if points:
        ax.plot(*zip(*points), marker="o" if len(points) < 20 else None,
                label=label or None)
    ax.set_title(name)
    ax.set_xlabel(xlabel)
    if any(series):
      ax.legend(fontsize=7)
  for ax in list(axes.flat)[len(panels):]:
    ax.axis("off")
  fig.tight_layout()
  with files.atomic_write(png_path, "wb") as f:
    fig.savefig(f, format="png")
  plt.close(fig)
  return png_path


def plot_curves(log_path: str, png_path: str) -> Optional[str]:
  """One panel per logged scalar against the step; returns the PNG path if written."""
  entries = read_log(log_path)
  # train_flops is step x a constant: a straight line that says nothing a panel should.
  names = {k for entry in entries.values() for k in entry} - {"train_flops"}
  return plot_panels({name: {"": [(s, e[name]) for s, e in entries.items() if name in e]}
                      for name in names}, "step", png_path)
