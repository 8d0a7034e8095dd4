"""export/smoothing.py: the outlier migration leaves the float model's outputs as they
were, and the full-int8 file of a model with an activation outlier, migrated, follows
the float model more closely than without."""

import os

from ai_edge_litert.interpreter import Interpreter
import numpy as np
import pytest
import tensorflow as tf

from export import litert, registry, smoothing, source
from model.internals import block_layers
from tests.export_helpers import add_outlier_channel, shared_glue_models


@pytest.fixture(scope="module")
def stsb_trial(tmp_path_factory):
  """export_helpers.shared_glue_models' STS-B (regression) model's trial dir: its
  scores are continuous, so every change of the outputs shows."""
  return shared_glue_models(tmp_path_factory)["glue/stsb"][1]


def dev_inputs(job):
  """The model's inputs of the training split's examples (the calibration rows'
  inputs, in another order), as tensors in the function's order."""
  rows = job.calibration
  order = np.random.default_rng(1).permutation(len(rows["input_ids"]))
  return [tf.constant(rows[name][order]) for name in job.deployable.inputs]


def test_smoothing_scales_follow_the_formula():
  x_max = np.array([4.0, 0.0, 100.0, 1.0], np.float32)
  w_max = np.array([0.25, 0.5, 0.04, 0.0], np.float32)
  got = smoothing.smoothing_scales(x_max, w_max, 0.5)
  np.testing.assert_allclose(got, [4.0, 1.0, 50.0, 1.0], rtol=1e-6)
  np.testing.assert_allclose(smoothing.smoothing_scales(x_max[:1], w_max[:1], 0.75),
                             [4.0 ** 0.75 / 0.25 ** 0.25], rtol=1e-6)


@pytest.mark.slow
def test_the_migrated_model_computes_the_float_outputs(stsb_trial):
  finetuned = source.load_finetuned(stsb_trial, note=lambda _: None)
  job = registry.Job(finetuned)
  model, blocks = finetuned.model, finetuned.model.encoder.transformer_layers
  inputs = dev_inputs(job)
  want = job.function(*inputs)["score"].numpy()
  variables = [v.numpy() for v in model.variables]
  names = [v.name for v in model.variables]
  layers = block_layers(blocks[0])
  kernel = layers.intermediate.kernel.numpy()
  with smoothing.migrated(model, blocks, job.calibration, 0.5):
    got = job.model_function()(*inputs)["score"].numpy()
    scaled = layers.intermediate.kernel.numpy()
    # The kernel rows are scaled (one s per input channel), so the migration did act.
    scales = scaled[:, 0] / kernel[:, 0]
    assert np.ptp(scales) > 0.1 * scales.mean()
    np.testing.assert_allclose(scaled, kernel * scales[:, None], rtol=1e-5)
  np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
  # Left as it was: the same variables, in the same order, with the same values.
  assert [v.name for v in model.variables] == names
  for value, before in zip(model.variables, variables):
    np.testing.assert_array_equal(value.numpy(), before)
  assert job.function(*inputs)["score"].numpy().tolist() == want.tolist()


def dense_outputs(path, job, inputs):
  """The first layer's FFN intermediate dense outputs (dequantized when int8) of the
  LiteRT file at `path`, over each row of `inputs`."""
  interpreter = Interpreter(model_path=path, experimental_preserve_all_tensors=True)
  runner = interpreter.get_signature_runner()
  [tensor] = [t for t in interpreter.get_tensor_details()
              if "layer_0/intermediate/" in t["name"]
              and t["name"].endswith("intermediate/add")]
  out = []
  for row in range(inputs[0].shape[0]):
    runner(**{name: value[row:row + 1].numpy()
              for name, value in zip(job.deployable.inputs, inputs)})
    value = interpreter.get_tensor(tensor["index"]).astype(np.float32)
    if tensor["dtype"] == np.int8:
      scale, zero_point = tensor["quantization"]
      value = (value - zero_point) * scale
    out.append(value.ravel())
  return np.concatenate(out)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:Warning. Enabling .experimental_preserve_all_tensors")
def test_migration_brings_full_int8_closer_to_float_on_an_outlier(stsb_trial, tmp_path):
  """An outlier channel in the FFN's input, as real pre-trained encoders have (the
  attention LayerNorm's channel 3 20x larger, the kernel row reading it 20x smaller):
  the int8 dense layer's outputs follow float's as closely as without the outlier once
  migrated. (The model's output is not compared: in a post-LayerNorm encoder the outlier
  also enters the residual sum, whose int8 range no migration of the dense layers'
  inputs changes.)"""
  finetuned = source.load_finetuned(stsb_trial, note=lambda _: None)
  add_outlier_channel(finetuned)
  errors, logged = {}, []
  for alpha in (None, 0.5):
    job = registry.Job(finetuned, calibration_size=32, smoothing_alpha=alpha)
    folder = tmp_path / str(alpha)
    folder.mkdir()
    assert litert.write(job, str(folder), logged.append, forms=("float32", "full_int8")) \
        == ["model_float32.tflite", "model_full_int8.tflite"]
    inputs = [value[:16] for value in dev_inputs(job)]
    want = dense_outputs(os.path.join(folder, "model_float32.tflite"), job, inputs)
    got = dense_outputs(os.path.join(folder, "model_full_int8.tflite"), job, inputs)
    errors[alpha] = np.sqrt(np.mean((got - want) ** 2)) / np.std(want)
    assert job.smoothed == ({} if alpha is None else {"model_full_int8.tflite": 0.5})
  path = os.path.join(folder, "model_full_int8.tflite")
  kept = {t["name"] for t in Interpreter(model_path=path).get_tensor_details()
          if t["name"].endswith(f"/{smoothing.SCOPE}/Maximum") and t["dtype"] == np.float32}
  assert len(kept) == 2, "the migrated file divides the dense inputs in float32"
  assert "outliers migrated (alpha 0.5)" in logged[-1]
  assert errors[0.5] < 0.5 * errors[None], errors
