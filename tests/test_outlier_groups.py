"""export/outlier_groups.py: keeping each block's outlier channels apart leaves the float
model's outputs as they were in every family, picks the channel an outlier is put in,
and keeps the other channels' precision in the full-int8 file, which stays integer-only
in its dense layers and residual sums."""

import json
import os

from ai_edge_litert.interpreter import Interpreter
import numpy as np
import pytest
import tensorflow as tf

from export import litert, outlier_groups, registry, source
from model.internals import block_layers
from tests.export_helpers import (refusal, shared_chunk_model, shared_glue_models,
                                  shared_squad_model)


def trial_dirs(tmp_path_factory):
  """A trial dir of each family's shared test model."""
  squad, _ = shared_squad_model(tmp_path_factory, "squad/v1.1", "squadv1")
  return {"sentence": shared_glue_models(tmp_path_factory)["glue/stsb"][1],
          "tagging": f"{shared_chunk_model(tmp_path_factory).model_dir}_1",
          "qa": f"{squad.model_dir}_1"}


def rows(job, count=None):
  """The calibration rows' inputs in another order, as tensors in the function's order."""
  calibration = job.calibration
  order = np.random.default_rng(1).permutation(len(calibration["input_ids"]))[:count]
  return [tf.constant(calibration[name][order]) for name in job.deployable.inputs]


@pytest.mark.slow
def test_the_grouped_model_computes_the_float_outputs_in_every_family(tmp_path_factory):
  for family, trial in trial_dirs(tmp_path_factory).items():
    finetuned = source.load_finetuned(trial, note=lambda _: None)
    job = registry.Job(finetuned, calibration_size=32)
    model, inputs = finetuned.model, rows(job)
    want = {k: v.numpy() for k, v in job.function(*inputs).items()}
    names, blocks = [v.name for v in model.variables], list(model.encoder.transformer_layers)
    with outlier_groups.grouped(model, job.calibration, 2) as chosen:
      got = {k: v.numpy() for k, v in job.model_function()(*inputs).items()}
    assert len(chosen) == len(model.encoder.transformer_layers)
    assert all(len(channels) == 2 for channels in chosen)
    assert sorted(got) == sorted(want), family
    for name, value in want.items():
      scale = np.abs(value).max() if value.dtype.kind == "f" else 0
      np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-5 * scale,
                                 err_msg=f"{family} {name}")
    # As it was on leaving: the same blocks, variables and outputs.
    assert [v.name for v in model.variables] == names
    assert list(model.encoder.transformer_layers) == blocks
    after = job.model_function()(*inputs)
    for name, value in want.items():
      np.testing.assert_array_equal(after[name].numpy(), value, err_msg=f"{family} {name}")


@pytest.fixture(scope="module")
def outlier_trial(tmp_path_factory):
  return shared_glue_models(tmp_path_factory)["glue/stsb"][1]


OUTLIER, OFFSET = 3, 100.0


def add_residual_outlier(finetuned):
  """An outlier channel in the first block's FFN output and the residual sum after it,
  as real pre-trained encoders have (all-MiniLM-L6-v2's reach 40-225 where the others
  stay near 2): OFFSET added to channel OUTLIER's bias."""
  output = block_layers(finetuned.model.encoder.transformer_layers[0]).output
  bias = output.bias.numpy()
  bias[OUTLIER] += OFFSET
  output.bias.assign(bias)


def residual_sums(path, job, inputs, name):
  """The first block's residual sum before its output LayerNorm (the tensor whose name
  ends with `name`: in the grouped file the other channels' part, the outlier's 0
  there; dequantized when int8) in the LiteRT file at `path`, [rows * tokens, hidden]."""
  interpreter = Interpreter(model_path=str(path), experimental_preserve_all_tensors=True)
  runner = interpreter.get_signature_runner()
  [tensor] = [t for t in interpreter.get_tensor_details()
              if t["name"].rstrip(";").endswith("/layer_0" + name)]
  sums = []
  for row in range(len(inputs[0])):
    runner(**{k: v[row:row + 1] for k, v in zip(job.deployable.inputs, inputs)})
    value = interpreter.get_tensor(tensor["index"]).astype(np.float32)
    if tensor["dtype"] == np.int8:
      scale, zero_point = tensor["quantization"]
      value = (value - zero_point) * scale
    sums.append(value.reshape(-1, value.shape[-1]))
  return np.concatenate(sums)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:Warning. Enabling .experimental_preserve_all_tensors")
def test_the_outlier_channel_is_chosen_and_the_other_channels_keep_their_precision(
    outlier_trial, tmp_path):
  """With an outlier in the first block's residual sum, that block picks its channel,
  and in the grouped full-int8 file the sum's other channels follow float's several
  times more closely than in one int8 tensor, whose step the outlier sets. The file
  stays integer-only where it was: every dense layer reads and writes int8 (but the one
  placing the outliers in the float32 LayerNorm's output), the residual sums are
  int8."""
  finetuned = source.load_finetuned(outlier_trial, note=lambda _: None)
  add_residual_outlier(finetuned)
  errors, logged = {}, []
  for channels, sum_name in ((0, "/add_1"), (1, "/output_others/add_1")):
    job = registry.Job(finetuned, calibration_size=32, outlier_channels=channels)
    if channels:
      chosen = outlier_groups.outlier_channels(finetuned.model, job.calibration, 1)
      assert chosen[0].tolist() == [OUTLIER]
    folder = tmp_path / str(channels)
    folder.mkdir()
    assert litert.write(job, str(folder), logged.append, forms=("float32", "full_int8")) \
        == ["model_float32.tflite", "model_full_int8.tflite"]
    assert job.grouped == ({} if not channels else {"model_full_int8.tflite": 1})
    inputs = [value.numpy() for value in rows(job, 16)]
    want = residual_sums(folder / "model_float32.tflite", job, inputs, "/add_1")
    got = residual_sums(folder / "model_full_int8.tflite", job, inputs, sum_name)
    assert want[:, OUTLIER].min() > OFFSET / 2  # the outlier is there
    if channels:
      assert not got[:, OUTLIER].any()
    others = np.arange(want.shape[1]) != OUTLIER
    errors[channels] = (np.sqrt(np.mean((got - want)[:, others] ** 2))
                        / np.std(want[:, others]))
  assert "1 outlier channels per block apart" in logged[-1]
  assert errors[1] < 0.25 * errors[0], errors

  interpreter = Interpreter(model_path=str(tmp_path / "1" / "model_full_int8.tflite"))
  tensors = interpreter.get_tensor_details()
  ops = interpreter._get_ops_details()  # pylint: disable=protected-access
  output_of = lambda op: tensors[op["outputs"][0]]
  dense = [op for op in ops if op["op_name"] == "FULLY_CONNECTED"
           and f"/{outlier_groups.SCOPE}/" not in output_of(op)["name"]]
  assert dense and all(tensors[op["inputs"][0]]["dtype"] == np.int8
                       and output_of(op)["dtype"] == np.int8 for op in dense)
  grouped = [op for op in ops if f"/{outlier_groups.SCOPE}/" in output_of(op)["name"]]
  assert grouped and all(output_of(op)["dtype"] == np.float32 for op in grouped)
  sums = [op for op in ops if op["op_name"] == "ADD" and "/output_outliers/" in
          output_of(op)["name"] and output_of(op)["name"].rstrip(";").endswith("add_1")]
  assert sums and all(output_of(op)["dtype"] == np.int8 for op in sums)


@pytest.mark.slow
def test_the_export_records_the_channels_and_refuses_too_many(outlier_trial, tmp_path,
                                                                 capsys):
  output = tmp_path / "out"
  registry.export(outlier_trial, str(output), ["litert"], calibration_size=8,
                  log=lambda _: None, variants={"litert": ["full_int8"]})
  info = json.loads((output / "deploy.json").read_text())
  assert info["outlier_channels"] == {"model_full_int8.tflite": registry.OUTLIER_CHANNELS}
  width = source.load_finetuned(outlier_trial, note=lambda _: None) \
      .model.encoder.model_config.hidden_size
  assert refusal(capsys, "--model-dir", outlier_trial, "--output", tmp_path / "o",
                 "--outlier-channels", str(width)) == (
      f"error: {outlier_trial}: --outlier-channels {width}: expected fewer than the "
      f"model's hidden size {width}")
  assert not os.path.exists(tmp_path / "o")
  # Only full int8 keeps channels apart: without it the count refuses nothing.
  written = registry.export(outlier_trial, str(tmp_path / "f"), ["litert"],
                            log=lambda _: None, variants={"litert": ["float32"]},
                            outlier_channels=width)
  assert [os.path.basename(p) for p in written] == ["model_float32.tflite"]
