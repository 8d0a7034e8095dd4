"""The training curves' PNG: per-batch points under their moving average, and eval
metrics (eval_curve.jsonl) as markers in the panel of the same metric."""

import json

import numpy as np

from runs.model_files import drop_log_rows_after
from training import curves


def write_jsonl(path, rows):
  path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def series(ax):
  """{legend label: (xs, ys, line)} of an axes' lines."""
  return {line.get_label(): (list(line.get_xdata()), list(line.get_ydata()), line)
          for line in ax.get_lines()}


def test_noisy_batches_get_a_moving_average_and_eval_metrics_their_markers(tmp_path):
  # A masked-LM accuracy that rises slowly under large per-batch jumps, as the quick
  # start's does.
  rng = np.random.default_rng(0)
  steps = list(range(10, 410, 10))
  accuracy = [0.1 + 0.0004 * s + rng.choice([-0.06, 0.06]) for s in steps]
  write_jsonl(tmp_path / curves.LOG_NAME,
              [{"step": s, "masked_lm_accuracy": a, "loss": 5.0, "train_flops": s * 1e9}
               for s, a in zip(steps, accuracy)])
  write_jsonl(tmp_path / curves.EVAL_CURVE_NAME,
              [{"global_step": 200, "masked_lm_accuracy": 0.17, "disc_auc": 0.6},
               {"global_step": 400, "masked_lm_accuracy": 0.25, "disc_auc": 0.7}])
  fig = curves.draw_curves(str(tmp_path / curves.LOG_NAME))
  panels = {ax.get_title(): series(ax) for ax in fig.axes if ax.get_title()}
  # train_flops is no panel; disc_auc, only evaluated, is one.
  assert sorted(panels) == ["disc_auc", "loss", "masked_lm_accuracy"]

  drawn = panels["masked_lm_accuracy"]
  assert sorted(drawn) == ["eval", "moving average", "per batch"]
  xs, ys, raw = drawn["per batch"]
  assert (xs, ys) == (steps, accuracy)  # every logged batch, faint and unjoined
  assert raw.get_alpha() < 1 and raw.get_linestyle() == "None"
  xs, smooth, line = drawn["moving average"]
  assert xs == steps and line.get_linestyle() == "-"
  # Centred windows of 5 points (a tenth of 40, odd): the jumps are averaged away.
  assert np.isclose(smooth[10], np.mean(accuracy[8:13]))
  assert np.isclose(smooth[0], np.mean(accuracy[:3]))
  assert np.std(np.diff(smooth)) < np.std(np.diff(accuracy)) / 3
  xs, ys, markers = drawn["eval"]
  assert (xs, ys) == ([200, 400], [0.17, 0.25]) and markers.get_linestyle() == "None"
  assert sorted(panels["disc_auc"]) == ["eval"]
  assert panels["disc_auc"]["eval"][:2] == ([200, 400], [0.6, 0.7])

  # The PNG is written (whole) where training writes it.
  png = tmp_path / curves.CURVES_NAME
  assert curves.plot_curves(str(tmp_path)) == str(png)
  assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_short_log_without_eval_is_drawn_as_before(tmp_path):
  write_jsonl(tmp_path / curves.LOG_NAME,
              [{"step": s, "loss": 6.0 - s} for s in (1, 2, 3)])
  fig = curves.draw_curves(str(tmp_path / curves.LOG_NAME))
  (ax,) = [ax for ax in fig.axes if ax.get_title()]
  (line,) = ax.get_lines()
  assert list(line.get_ydata()) == [5.0, 4.0, 3.0] and line.get_marker() == "o"
  assert ax.get_legend() is None


def test_a_resumed_run_keeps_one_log_row_per_step(tmp_path):
  log = tmp_path / curves.LOG_NAME
  write_jsonl(log, [{"step": s, "loss": float(s)} for s in (1, 2, 3, 4)])
  drop_log_rows_after(str(tmp_path), 2)  # resumed from ckpt-2: steps 3 and 4 are redone
  assert [json.loads(l)["step"] for l in log.read_text().splitlines()] == [1, 2]


def test_a_broken_eval_row_is_left_out_saying_where(tmp_path, capsys):
  write_jsonl(tmp_path / curves.LOG_NAME, [{"step": s, "loss": 1.0} for s in (1, 2)])
  eval_path = tmp_path / curves.EVAL_CURVE_NAME
  eval_path.write_text('{"global_step": 2, "disc_auc": 0.6}\n{"global_step": 4, "disc')
  assert curves.read_eval_curve(str(eval_path)) == {2: {"disc_auc": 0.6}}
  assert capsys.readouterr().out == (
      f"note: {eval_path}:2: not a row with 'global_step' (JSONDecodeError); left out of "
      "the curves\n")


def test_every_panels_labels_fit_its_cell(tmp_path):
  """The fixed margins hold each panel's tick labels, offset, title and x label: no
  panel's drawn extent leaves the figure or reaches into another's, whatever the
  values' sizes and signs."""
  steps = list(range(0, 1_000_001, 25_000))
  rng = np.random.default_rng(0)
  write_jsonl(tmp_path / curves.LOG_NAME, [
      {"step": s, "learning_rate": 2e-3 * (1 - s / 2e6) + 1.234e-7,
       "flops_per_s": 1.234e10 + 1e8 * rng.standard_normal(), "loss": 12345.678 - s / 100,
       "a_rather_long_scalar_name": -0.000123 * (1 + rng.standard_normal()),
       "disc_accuracy": 0.5 + 0.4 * s / 1e6} for s in steps])
  fig = curves.draw_curves(str(tmp_path / curves.LOG_NAME))
  fig.canvas.draw()
  renderer = fig.canvas.get_renderer()
  frame = fig.bbox
  boxes = [ax.get_tightbbox(renderer) for ax in fig.axes if ax.get_title()]
  assert len(boxes) == 5
  for i, box in enumerate(boxes):
    assert (frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0
            and box.y1 <= frame.y1), (i, box, frame)
    for other in boxes[i + 1:]:
      assert not box.overlaps(other), (box, other)
