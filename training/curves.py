"""The training log (JSON lines) and the PNG panels drawn from it.

One logged batch is noisy (the quick start's masked-LM accuracy jumps by 0.1 between
log lines), so a training curve is drawn as faint per-batch points under their centred
moving average; held-out eval metrics, when <model_dir>/eval_curve.jsonl holds them
(tools/eval_checkpoints.py writes it), are drawn as markers in the same panel.
"""

import io
import json
import math
import os
import warnings
from typing import Dict, List, Optional

from runs import model_files
from runs.model_files import CURVES_NAME, EVAL_CURVE_NAME, LOG_NAME
from util import files


def read_log(path: str) -> Dict[int, Dict[str, float]]:
  """step -> scalars; a step logged twice (redone after a resume) keeps the last entry."""
  return _read_rows(path, "step")


def read_eval_curve(path: str) -> Dict[int, Dict[str, float]]:
  """global_step -> eval metrics of <model_dir>/eval_curve.jsonl ({} if there is none);
  a step evaluated twice keeps the last row. Another tool writes it, so a row that is
  not one (a line cut short) is left out, saying so, rather than failing the curves
  at the end of training."""
  return _read_rows(path, "global_step", tolerant=True)


def _read_rows(path: str, key: str, tolerant: bool = False
               ) -> Dict[int, Dict[str, float]]:
  rows = {}
  if os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      for number, line in enumerate(f, start=1):
        if not line.strip():
          continue
        try:
          row = json.loads(line)
          rows[int(row.pop(key))] = row
        except (ValueError, KeyError, TypeError, AttributeError) as e:
          if not tolerant:
            raise ValueError(f"{path}:{number}: not a row with {key!r} ({e}); expected one "
                             "JSON object per line") from None
          print(f"note: {path}:{number}: not a row with {key!r} ({type(e).__name__}); "
                "left out of the curves", flush=True)
  return dict(sorted(rows.items()))


# One panel's cell in inches, and the room around its axes for the tick labels (up to
# 8 characters at the left), the x label below, the title (and an axis' offset such as
# 1e9) above.
PANEL_WIDTH, PANEL_HEIGHT = 4.5, 3.0
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_BOTTOM, MARGIN_TOP = 0.8, 0.2, 0.55, 0.4


def moving_average(values: List[float]) -> List[float]:
  """Each value replaced by the mean of the values centred on it, about a tenth of the
  curve (fewer at the ends): no lag, so a trend shows where it happens."""
  half = max(3, len(values) // 10) // 2
  return [sum(values[max(0, i - half):i + half + 1]) /
          len(values[max(0, i - half):i + half + 1]) for i in range(len(values))]


def plot_panels(panels: Dict[str, Dict[str, list]], xlabel: str, png_path: str
                ) -> Optional[str]:
  """draw_panels' figure of `panels` in two columns, written atomically; returns the
  path (None when there is nothing to draw)."""
  png = figure_png(draw_panels(panels, xlabel, columns=2))
  if png is None:
    return None
  with files.atomic_write(png_path, "wb") as f:
    f.write(png)
  return png_path


def figure_png(fig) -> Optional[bytes]:
  """`fig` (None: nothing) as a PNG's bytes, the figure closed."""
  if fig is None:
    return None
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  png = io.BytesIO()
  with warnings.catch_warnings():
    # A task's name in a script the font lacks (Hangul, kana) is drawn as boxes, once
    # per character, not warned of: the results' files hold it as it is.
    warnings.filterwarnings("ignore", "Glyph .* missing from font")
    fig.savefig(png, format="png")
  plt.close(fig)
  return png.getvalue()


def draw_panels(panels: Dict[str, Dict[str, list]], xlabel: str, columns: int,
                smoothed: bool = False,
                marked: Optional[Dict[str, Dict[str, list]]] = None):
  """The matplotlib figure (None: nothing to draw) of `panels`, {name: {label: [(x, y),
  ...]}}: one panel per name, one line per label ("" unlabeled); `smoothed`, series of
  5 points or more as faint points under their moving average; `marked` (same form)
  as markers only."""
  marked = marked or {}
  names = {name for source in (panels, marked) for name, series in source.items()
           if any(points for points in series.values())}
  if not names:
    return None
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  cols = min(columns, len(names))
  rows = math.ceil(len(names) / cols)
  fig, axes = plt.subplots(rows, cols, figsize=(PANEL_WIDTH * cols, PANEL_HEIGHT * rows),
                           squeeze=False)
  # Fixed margins, not tight_layout: measuring the labels draws the figure once more,
  # a third of the drawing's time (bench/RESULTS.md, "The test suite's time").
  width, height = PANEL_WIDTH * cols, PANEL_HEIGHT * rows
  axes_width = PANEL_WIDTH - MARGIN_LEFT - MARGIN_RIGHT
  axes_height = PANEL_HEIGHT - MARGIN_BOTTOM - MARGIN_TOP
  fig.subplots_adjust(left=MARGIN_LEFT / width, right=1 - MARGIN_RIGHT / width,
                      bottom=MARGIN_BOTTOM / height, top=1 - MARGIN_TOP / height,
                      wspace=(MARGIN_LEFT + MARGIN_RIGHT) / axes_width,
                      hspace=(MARGIN_BOTTOM + MARGIN_TOP) / axes_height)
  for ax, name in zip(axes.flat, sorted(names)):
    labelled = False
    for label, points in panels.get(name, {}).items():
      if not points:
        continue
      if smoothed and len(points) >= 5:
        steps, values = zip(*points)
        raw = ax.plot(steps, values, linestyle="none", marker=".", markersize=3,
                      alpha=0.3, label=f"{label} per batch".strip())[0]
        ax.plot(steps, moving_average(list(values)),
                color=raw.get_color(), label=f"{label} moving average".strip())
        labelled = True
      else:
        ax.plot(*zip(*points), marker="o" if len(points) < 20 else None,
                label=label or None)
        labelled = labelled or bool(label)
    for label, points in marked.get(name, {}).items():
      if points:
        ax.plot(*zip(*points), linestyle="none", marker="D", markersize=6,
                color="black", label=label or None)
        labelled = labelled or bool(label)
    ax.set_title(name)
    ax.set_xlabel(xlabel)
    if labelled:
      ax.legend(fontsize=7)
  for ax in list(axes.flat)[len(names):]:
    ax.axis("off")
  return fig


def plot_curves(model_dir: str) -> Optional[str]:
  """draw_curves' figure of a model dir's log, written there (CURVES_NAME); returns
  its path if written."""
  png = figure_png(draw_curves(os.path.join(model_dir, LOG_NAME)))
  return png and model_files.write(model_dir, CURVES_NAME, png)


def draw_curves(log_path: str):
  """One panel per logged scalar against the step, smoothed, with the eval metrics of
  eval_curve.jsonl beside the log as markers, a metric in both in one panel; None when
  there is nothing to draw."""
  entries = read_log(log_path)
  evaluated = read_eval_curve(os.path.join(os.path.dirname(log_path), EVAL_CURVE_NAME))
  # train_flops is step x a constant: a straight line that says nothing a panel should.
  names = {k for entry in entries.values() for k in entry} - {"train_flops"}
  eval_names = {k for row in evaluated.values() for k, v in row.items()
                if isinstance(v, (int, float))}
  return draw_panels(
      {name: {"": [(s, e[name]) for s, e in entries.items() if name in e]}
       for name in names}, "step", columns=3, smoothed=True,
      marked={name: {"eval": [(s, r[name]) for s, r in evaluated.items() if name in r]}
              for name in eval_names})
