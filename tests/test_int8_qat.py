"""experiments/int8_qat.py: its sublayer forward computes the model's own outputs, its
fake-quantized forward follows the full-int8 file more closely than the float model
does, and a short run writes a QAT model dir that loads and exports."""

import json
import os

import numpy as np
import pytest

from experiments import int8_qat
from export import litert, registry, source
from tests.export_helpers import add_outlier_channel, shared_glue_models


@pytest.fixture(scope="module")
def stsb_trial(tmp_path_factory):
  """export_helpers.shared_glue_models' STS-B (regression) trial dir: continuous scores."""
  return shared_glue_models(tmp_path_factory)["glue/stsb"][1]


@pytest.mark.slow
def test_the_sublayer_forward_computes_the_models_outputs(stsb_trial):
  finetuned = source.load_finetuned(stsb_trial, note=lambda _: None)
  rows = registry.Job(finetuned).calibration
  want = finetuned.model(rows, training=False)[finetuned.runner.head_name].numpy()
  got = int8_qat.outputs_of(finetuned, int8_qat.FakeQuant(), rows)
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


@pytest.mark.slow
def test_the_fake_quantized_forward_follows_the_full_int8_file(stsb_trial, tmp_path):
  """With an outlier channel (export_helpers.add_outlier_channel), full int8 moves the
  outputs far from float's; the fake-quantized forward moves them towards the file's.
  (Without one, the file's error is rounding noise, which no simulation short of the
  converter's own arithmetic predicts.)"""
  finetuned = source.load_finetuned(stsb_trial, note=lambda _: None)
  add_outlier_channel(finetuned)
  job = registry.Job(finetuned, outlier_channels=0)  # the file the study simulates
  litert.write(job, str(tmp_path), lambda _: None, forms=("full_int8",))
  rows = job.calibration
  order = np.random.default_rng(1).permutation(len(rows["input_ids"]))
  inputs = {k: v[order] for k, v in rows.items()}  # other rows' order than calibration's
  file = int8_qat.file_outputs(str(tmp_path / "model_full_int8.tflite"), inputs,
                               job.deployable.inputs)
  quant = int8_qat.FakeQuant()
  float_outputs = int8_qat.outputs_of(finetuned, quant, inputs)
  int8_qat.observe_ranges(finetuned, quant, rows)
  # The embeddings (projected: 3 points), one layer (13), the head.
  assert quant.mode == "quantize" and len(quant.lows) == 3 + 13 + 1
  simulated = int8_qat.outputs_of(finetuned, quant, inputs)
  # Closer to the file than float is. How much closer varied between a run alone (under
  # half float's distance) and one in the full suite (0.78 of it), so no tighter bound.
  assert np.abs(simulated - file).mean() < np.abs(float_outputs - file).mean()


@pytest.mark.slow
def test_a_short_run_writes_a_qat_model_that_exports(stsb_trial, tmp_path, capsys):
  work = tmp_path / "work"
  assert int8_qat.main(["--model-dir", stsb_trial, "--work-dir", str(work), "--epochs",
                        "0.5", "--timing-steps", "1", "--range-every", "2"]) == 0
  results = json.loads((work / "results.json").read_text())
  assert results["training"]["steps"] == 3  # 96 pairs, both orders, half an epoch of 32
  assert results["forward_max_abs_diff"] < 1e-4
  assert set(results["files"]) == (
      {f"float {form}" for form in int8_qat.FILE_FORMS}
      | {f"qat {form}" for form in int8_qat.QAT_FORMS})
  for graph in ("float graph", "qat graph"):
    assert {"pearson", "against its full_int8 file"} <= set(results[graph])
  for scores in results["files"].values():
    assert {"pearson", "spearman"} <= set(scores) and scores["MiB"] > 0
  qat = source.load_finetuned(str(work / "qat"), note=lambda _: None)
  trained = source.load_finetuned(stsb_trial, note=lambda _: None)
  assert any(np.abs(a.numpy() - b.numpy()).max() > 0
             for a, b in zip(qat.model.variables, trained.model.variables))
  assert not os.path.exists(str(work / "qat.tmp"))
  out = capsys.readouterr().out
  assert "QAT step 3/3" in out
  assert "| qat full_int8 | " in out and "| float graph | " in out
