"""tools.export_lite: each exported file runs with its runtime alone (ai-edge-litert or
onnxruntime, in a process without TensorFlow or the project), the float forms give the
serving SavedModel's outputs, the int8 forms its labels, the shipped reader the
project's ids; and each bad input is one line with nothing written."""

import json
import os
import re
import subprocess
import sys
import types
import warnings

from ai_edge_litert.interpreter import Interpreter, OpResolverType
import numpy as np
import onnx
import pytest
import tensorflow as tf

from export import litert, registry, source
from tools import litert_ops
from finetune import graph_tokenizer, serving, trainer
from finetune.sentence import serving as sentence_serving
from model.weights import original as original_names
from tests.helpers import listing, ROOT, shared_path, write_tiny_pretrained_model
from tests.export_helpers import (GLUE_DEV_ROWS, GLUE_FOLDERS, export_all, refusal,
                                   run_readers, shared_glue_models, shared_sst2_export)
from tools import export_hf, export_lite
from util import files, stderr as util_stderr


@pytest.fixture(scope="module")
def finetuned(tmp_path_factory):
  """{task: (FinetuningConfig, its trial dir)}: export_helpers.shared_glue_models'
  SST-2 (single sentences) and STS-B (pairs, regression) models."""
  return shared_glue_models(tmp_path_factory)


MIXED = "model_mixed_int8.tflite"


@pytest.fixture(scope="module")
def sst2_export(tmp_path_factory):
  """export_helpers.shared_sst2_export (every form, outliers migrated), which three
  tests read."""
  return shared_sst2_export(tmp_path_factory)


@pytest.mark.slow
@pytest.mark.parametrize("task", list(GLUE_FOLDERS))
def test_exports_run_alone_and_match_the_saved_model(finetuned, tmp_path, task, request):
  config, trial = finetuned[task]
  if task == "glue/sst2":
    output, printed, _ = request.getfixturevalue("sst2_export")
  else:
    output = tmp_path / "export"
    printed, _ = export_all(trial, output, "all")
  assert f"wrote {output}" in printed
  # deploy.json names the files whose outliers were migrated (SST-2's only).
  assert json.loads((output / "deploy.json").read_text())["smoothing_alpha"] == (
      {"model_full_int8.tflite": 0.5, MIXED: 0.5} if task == "glue/sst2" else {})
  finetuner = trainer.Finetuner(config, log=lambda _: None)
  dev = finetuner.split(0, "dev")
  texts = {"a": [e.text_a for e in dev.examples]}
  if task == "glue/stsb":
    texts["b"] = [e.text_b for e in dev.examples]
  names = sorted(n for n in os.listdir(output) if n.startswith("model_") and n != MIXED)
  assert len(names) == 5
  args = [texts["a"], texts["b"]] if "b" in texts else [texts["a"]]
  got = run_readers(output, names, args)
  for name, run in got.items():
    assert run["runtimes"] == ["ai_edge_litert" if name.endswith(".tflite")
                               else "onnxruntime"], name
    # The reader's ids are the project's, from the project's modules shipped beside it,
    # as long as the longest text (the rest of max_seq_length is padding).
    assert run["tokenizer"].startswith(str(output))
    longest = dev.features["input_mask"].sum(-1).max()
    for key, value in run["inputs"].items():
      np.testing.assert_array_equal(value, dev.features[key][:, :longest])

  # Full int8 keeps its dense layers int8 and leaves no op XNNPACK lacks an int8 kernel
  # for (the layer norms' SUB, SQUARED_DIFFERENCE and RSQRT, the attention's
  # BATCH_MATMUL: float32, and taken by XNNPACK), as bench/RESULTS.md says.
  ops, taken, _ = litert_ops.delegated_ops(str(output / "model_full_int8.tflite"))
  kinds = {op.split("[")[0] for op in ops}
  assert "FULLY_CONNECTED[int8]" in ops and "FULLY_CONNECTED[float32]" not in ops
  for kind in ("SUB", "SQUARED_DIFFERENCE", "RSQRT", "BATCH_MATMUL", "FULLY_CONNECTED"):
    assert kind in kinds
    assert all(done for op, done in zip(ops, taken) if op.startswith(kind + "[")
               and (kind == "FULLY_CONNECTED" or "float32" in op)), kind
  assert not [op for op in ops if op.startswith(("SQUARED_DIFFERENCE", "RSQRT",
                                                 "BATCH_MATMUL")) and "int8" in op]

  # ONNX int8 quantizes every dense kernel: one integer matmul each, and no float Gemm or
  # MatMul reads a constant (tf2onnx's Gemm, and the attention's weights behind a
  # computed Reshape, once stayed float32).
  quantized = onnx.load(str(output / "model_dynamic_int8.onnx")).graph
  constants = {w.name for w in quantized.initializer}
  assert not [n.name for n in quantized.node
              if n.op_type in ("Gemm", "MatMul") and constants & set(n.input)]
  # (The segment embeddings are a one-hot matmul too: model/encoder.py.)
  matrices = [v for v in source.load_finetuned(trial).model.variables
              if v.name.endswith(("kernel:0", "token_type_embeddings/embeddings:0"))
              and len(v.shape) >= 2]
  assert sum(n.op_type == "MatMulInteger" for n in quantized.node) == len(matrices)
  # Its weights are within +-64 (7 bits), scaled per output column: without VNNI,
  # onnxruntime sums pairs of uint8 x int8 products in int16, and 255 * 64 * 2 = 32,640
  # stays below 2^15 on any CPU.
  weights = {w.name: onnx.numpy_helper.to_array(w) for w in quantized.initializer}
  for node in quantized.node:
    if node.op_type == "MatMulInteger":
      kernel = weights[node.input[1]]
      scale = weights[node.input[1].removesuffix("_quantized") + "_scale"]
      assert kernel.dtype == np.int8 and np.abs(kernel.astype(int)).max() <= 64, node.name
      assert scale.shape == kernel.shape[-1:], (node.name, scale.shape)

  # Padding is masked in every LiteRT form: the ids at masked positions change nothing
  # (the full-int8 model once quantized 1 - mask to 0, which unmasked padding and flipped
  # a tiny SST-2 model's labels).
  padded = {k: np.array(v, np.int32) for k, v in got[names[0]]["inputs"].items()}
  assert (padded["input_mask"] == 0).any()
  other = dict(padded, input_ids=np.where(padded["input_mask"] == 0, 1000, padded["input_ids"]))
  for name in names:
    if name.endswith(".tflite"):
      runner = Interpreter(model_path=str(output / name)).get_signature_runner()
      key = "score" if task == "glue/stsb" else "probabilities"
      np.testing.assert_allclose(runner(**other)[key], runner(**padded)[key], atol=1e-6,
                                 err_msg=name)

  saved = tf.saved_model.load(os.path.join(trial, serving.SAVED_MODEL))
  signature = saved.signatures["serving_default"]
  want = signature(**{f"text_{k}": tf.constant(v) for k, v in texts.items()})
  key = "score" if task == "glue/stsb" else "probabilities"
  want = want[key].numpy()
  assert np.ptp(want) > 1e-3  # the inputs are told apart
  for name, run in got.items():
    outputs = run["outputs"]
    value = np.array(outputs[key])
    if "float32" in name:
      np.testing.assert_allclose(value, want, atol=1e-4, err_msg=name)
    elif task == "glue/sst2":
      agree = np.mean(value.argmax(-1) == want.argmax(-1))
      assert agree >= 0.95 and outputs["label_id"] == value.argmax(-1).tolist(), (
          name, agree)
    else:  # int8 regression: no labels; within 5% of STS-B's 0-5 scale of the float
      # scores (the tiny model's scores spread too little for a correlation to say much)
      assert np.abs(value - want).max() < 0.25, (name, np.abs(value - want).max())


@pytest.mark.slow
def test_every_form_runs_at_the_inputs_length(sst2_export):
  """Every file of a sentence model declares a free token axis (read from the file; as
  deploy.json states) and runs at the batch's longest text, giving the outputs it gives
  at max_seq_length: within 1e-5 in every form but ONNX's int8, whose activation
  ranges, computed per tensor as it runs, take the padded positions in (1.3e-3 apart
  here): the same labels there. (LiteRT's int8 forms see no padding: XNNPACK quantizes
  each row on its own, full int8's ranges are fixed; measured equal.)"""
  output, _, _ = sst2_export
  info = json.loads((output / "deploy.json").read_text())
  names = sorted(n for n in os.listdir(output) if n.startswith("model_"))
  assert len(names) == 6 and info["input_lengths"] == {name: "longest" for name in names}
  texts = ["a fine film", "dull", "it was long , slow and tiresome ."]
  for name, run in run_readers(output, names, [texts]).items():
    assert run["declared"] == {k: [None, None] for k in sentence_serving.SERVING.inputs}, name
    mask = np.array(run["inputs"]["input_mask"])
    assert mask.shape[1] == mask.sum(-1).max() < info["max_seq_length"]
    short, padded = (np.array(run[k]["probabilities"]) for k in ("outputs",
                                                                  "padded_outputs"))
    if name == "model_dynamic_int8.onnx":
      assert (short.argmax(-1) == padded.argmax(-1)).all(), name
    else:
      np.testing.assert_allclose(short, padded, atol=1e-5, err_msg=name)


@pytest.mark.slow
def test_bad_input_is_one_line_and_nothing_written(finetuned, tmp_path, capsys):
  _, trial = finetuned["glue/sst2"]
  out = tmp_path / "out"
  assert "is not a fine-tuned model dir" in refusal(capsys, "--model-dir", tmp_path,
                                                    "--output", out)
  assert f"did you mean {trial}?" in refusal(capsys, "--model-dir", trial[:-2],
                                             "--output", out)
  pretrained = tmp_path / "pretrain"
  pretrained.mkdir()
  (pretrained / "pretrain_config.json").write_text("{}")
  assert "is a pre-training model dir" in refusal(capsys, "--model-dir", pretrained,
                                                  "--output", out)
  multi = tmp_path / "multi_model_1"
  multi.mkdir()
  with open(os.path.join(trial, "finetuning_config.json"), encoding="utf-8") as f:
    record = json.load(f)
  record["finetuning"]["task_names"] = ["glue/sst2", "chunk"]
  (multi / "finetuning_config.json").write_text(json.dumps(record))
  assert "fine-tuned on glue/sst2,chunk; the exports take one task's model" in refusal(
      capsys, "--model-dir", multi, "--output", out)
  # An output over an input: the model dir itself, or a folder inside it.
  assert "is the model dir" in refusal(capsys, "--model-dir", trial, "--output", trial)
  assert "is inside the model dir" in refusal(capsys, "--model-dir", trial, "--output",
                                              os.path.join(trial, "export"))
  empty = tmp_path / "empty" / "finetuning_data" / "SST-2"
  empty.mkdir(parents=True)
  assert "SST-2" in refusal(capsys, "--model-dir", trial, "--output", out,
                            "--data-dir", empty.parent.parent)  # the split is missing
  (empty / "train.tsv").write_text("sentence\tlabel\n")
  assert "train split of glue/sst2 has no examples" in refusal(capsys, "--model-dir", trial,
                                                   "--output", out, "--data-dir",
                                                   empty.parent.parent)
  out.mkdir()
  assert f"{out} exists" in refusal(capsys, "--model-dir", trial, "--output", out)
  assert os.listdir(out) == [] and sorted(os.listdir(tmp_path)) == [
      "empty", "multi_model_1", "out", "pretrain"]  # no temporary folder left


@pytest.mark.slow
def test_an_op_litert_lacks_is_named(finetuned):
  """The in-graph WordPiece step of the SavedModel: why the exports take token ids."""
  config, _ = finetuned["glue/sst2"]
  with open(config.vocab_file, encoding="utf-8") as f:
    tokens = f.read().splitlines()
  tokenizer = graph_tokenizer.GraphTokenizer(tokens)
  function = tf.function(lambda text: {"ids": tokenizer(text).to_tensor()},
                         input_signature=[tf.TensorSpec([None], tf.string)],
                         autograph=False)
  with pytest.raises(ValueError) as raised:
    litert.to_litert(function, tokenizer.variables, "float32")
  message = str(raised.value)
  assert "\n" not in message
  for op in ("FastWordpieceTokenizeWithOffsets", "UnicodeDecode", "StaticRegexReplace"):
    assert op in message


@pytest.mark.parametrize("flags,message", [
    (["--output", ""], "--output '': expected a path"),
    (["--output", "o", "--seed", "-1"],
     "--seed -1: expected an integer in [0, 4294967295]"),
    (["--output", "o", "--calibration-examples", "0"],
     "--calibration-examples 0: expected an integer >= 1"),
    (["--output", "o", "--smoothing-alpha", "1.5"],
     "--smoothing-alpha '1.5': expected a number from 0 to 1, or none"),
    (["--output", "o", "--outlier-channels", "-1"],
     "--outlier-channels -1: expected an integer >= 0"),
    # A flag the chosen forms do not read would do nothing.
    (["--output", "o", "--format", "litert_mixed_int8,onnx", "--outlier-channels",
      "100000"], "--outlier-channels is full int8's, of --format litert; --format "
                 "litert_mixed_int8,onnx writes no full int8")])
def test_flags_are_checked_before_any_work(tmp_path, capsys, flags, message):
  with pytest.raises(SystemExit) as raised:
    export_lite.main(["--model-dir", str(tmp_path)] + flags)
  assert raised.value.code == 2
  assert capsys.readouterr().err.splitlines()[-1].endswith(f": error: {message}")
  assert not os.listdir(tmp_path)


@pytest.mark.slow
def test_calibration_on_fewer_examples_than_asked_is_said(finetuned, tmp_path):
  """--calibration-examples past the training split's 96 rows: the number used is said,
  and recorded."""
  _, trial = finetuned["glue/sst2"]
  data = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(trial))))
  before = listing(data)
  printed, _ = export_all(trial, tmp_path / "out", "litert_mixed_int8",
                          "--calibration-examples", "1000000000000")
  assert ("note: calibrating on 96 inputs, all that the training split gives (asked for "
          "1000000000000)") in printed.splitlines()
  info = json.loads((tmp_path / "out" / "deploy.json").read_text())
  assert info["calibration_examples"] == 96
  assert listing(data) == before and os.listdir(tmp_path) == ["out"]


@pytest.mark.slow
def test_the_command_runs_by_its_name(tmp_path):
  """python -m tools.export (the tests above call it by its former name, export_lite)."""
  run = subprocess.run([sys.executable, "-m", "tools.export", "--model-dir", str(tmp_path),
                        "--output", "o", "--seed", "-1"], cwd=ROOT, capture_output=True,
                       text=True)
  assert run.returncode == 2 and run.stderr.splitlines()[-1] == (
      "export.py: error: --seed -1: expected an integer in [0, 4294967295]")


def test_a_pretraining_export_or_a_record_not_the_runs_is_named(tmp_path, capsys):
  write_tiny_pretrained_model(tmp_path)
  export = tmp_path / "models" / "tiny" / "export"
  assert refusal(capsys, "--model-dir", export, "--output", tmp_path / "out") == (
      f"error: {export} is a pre-training export (pre-trained weights in the original "
      "checkpoint format), not a fine-tuned model; fine-tune it first (python "
      f"run_finetuning.py --task TASK --init-checkpoint {export}) and give the "
      "fine-tuned trial's dir (<model_dir>_1)")
  trial = tmp_path / "sst2_model_1"
  trial.mkdir()
  (trial / "finetuning_config.json").write_text('{"foo": 1}')
  assert refusal(capsys, "--model-dir", trial, "--output", tmp_path / "out") == (
      f"error: {trial}/finetuning_config.json: not the run's record (holds a JSON object "
      "with keys 'foo'; expected the JSON object run_finetuning.py writes, with "
      "'finetuning' and 'model' objects); put the run's own record back, or use another "
      "model_dir, or set \"overwrite_model_dir\": true to delete the run and start over")
  assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_killed_exports_temporary_folder_is_removed_by_the_next(tmp_path):
  """An export killed (-9) leaves its temporary folder; the next export in the same
  place removes it, and never a live export's."""
  code = ("import os, sys, time\nimport filelock\nfrom util import files\n"
          "tmp = os.path.join(sys.argv[1], sys.argv[2])\nos.makedirs(tmp)\n"
          "open(os.path.join(tmp, 'model_float32.tflite'), 'wb').write(bytes(1000))\n"
          "with filelock.FileLock(os.path.join(tmp, files.IN_PROGRESS)):\n"
          "  print('held', flush=True)\n  time.sleep(600)\n")
  procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path), name],
                            cwd=os.path.dirname(os.path.dirname(__file__)),
                            stdout=subprocess.PIPE, text=True)
           for name in (".killed.abc", ".live.def")]
  try:
    for proc in procs:
      assert proc.stdout.readline() == "held\n"
    procs[0].kill()
    procs[0].wait()
    (tmp_path / ".unrelated").mkdir()  # no lock file: not an export's
    said = []
    files.remove_stale_folders(str(tmp_path), said.append, "an export")
    assert said == [f"removed {tmp_path}/.killed.abc, the temporary folder of an export "
                    "that was stopped before it finished"]
    assert sorted(os.listdir(tmp_path)) == [".live.def", ".unrelated"]
  finally:
    for proc in procs:
      proc.kill()
      proc.wait()
      proc.stdout.close()


FULL_DISK = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG)
resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, resource.RLIM_INFINITY))
from tools import export_lite
sys.exit(export_lite.main(sys.argv[1:]))
"""


def test_conversions_print_none_of_the_converters_notes(capfd):
  """The LiteRT converter's notes on every conversion (options it ignores, the
  calibrator's settings) and the QuantizationDebugger's deprecation warning stay out of
  what an export prints."""
  kernel = tf.Variable(np.eye(4, dtype=np.float32))
  function = tf.function(lambda x: tf.matmul(x, kernel),
                         input_signature=[tf.TensorSpec([1, 4], tf.float32, name="x")])
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for form in ("float32", "full_int8"):
      litert.to_litert(function, [kernel], form, {"x": np.eye(4, dtype=np.float32)})
  printed = capfd.readouterr().err.splitlines()
  assert not [line for line in printed if any(
      fragment in line for fragment in util_stderr.CONVERTER_LINES)], printed
  assert not [w for w in caught if "tf.lite.Interpreter" in str(w.message)]


@pytest.mark.slow
def test_a_full_disk_during_an_export_names_what_was_written_and_leaves_nothing(
    finetuned, tmp_path):
  _, trial = finetuned["glue/sst2"]
  out = tmp_path / "out"
  run = subprocess.run([sys.executable, "-c", FULL_DISK, "--model-dir", trial, "--output",
                        str(out), "--calibration-examples", "8"],
                       cwd=os.path.dirname(os.path.dirname(__file__)),
                       capture_output=True, text=True, check=False)
  assert run.returncode == 2, run.stderr[-2000:]
  assert run.stderr.splitlines()[-1] == (
      f"error: {out}: File too large (writing model_float32.tflite); nothing was "
      "written (the partial export was removed)")
  assert os.listdir(tmp_path) == []


def ffn_dense_weights(path, dense: str) -> dict:
  """{layer: (int8 weights, per-row scales)} of the FFN's `dense` layers ("intermediate"
  or "output") of a LiteRT file, read by the interpreter without a delegate (which
  would take the constants)."""
  interpreter = Interpreter(model_path=str(path), experimental_op_resolver_type=
                            OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
  interpreter.allocate_tensors()
  tensors = {t["index"]: t for t in interpreter.get_tensor_details()}
  found = {}
  for op in interpreter._get_ops_details():  # pylint: disable=protected-access  # no public list
    layer = re.search(rf"layer_(\d+)/{dense}/", tensors[op["outputs"][0]]["name"])
    if op["op_name"] == "FULLY_CONNECTED" and layer:
      weights = tensors[op["inputs"][1]]
      found[int(layer.group(1))] = (interpreter.get_tensor(weights["index"]).astype(np.float64),
                                    weights["quantization_parameters"]["scales"])
  return found


@pytest.mark.slow
def test_the_mixed_int8_form_runs_alone_and_keeps_the_labels(finetuned, sst2_export):
  """litert_mixed_int8: full int8 with each layer's residual sums float32 and its FFN
  float32 (both dense layers float32 in and out with int8 weights, the GELU between
  them float32; the attention's dense layers int8 in and out); in a process without
  TensorFlow it keeps the float model's labels, and
  padding stays masked. The float32 model is converted once, and so is the migrated
  one (export/smoothing.py), the calibrated forms' reference, for both writers, and
  full int8's with its outlier channels apart (export/outlier_groups.py)."""
  _, trial = finetuned["glue/sst2"]
  out, printed, converted = sst2_export
  assert MIXED in printed
  assert converted == ["float32", "dynamic_int8", "float32", "full_int8", "float32",
                       "mixed_int8"]
  finetuned_model = source.load_finetuned(trial)
  layers = finetuned_model.sizes.num_hidden_layers
  dense, ops = {}, {}
  for name in ("model_full_int8.tflite", MIXED):
    ops[name], taken, _ = litert_ops.delegated_ops(str(out / name))
    dense[name] = [(op, delegated) for op, delegated in zip(ops[name], taken)
                   if op.startswith("FULLY_CONNECTED")]
  # Per layer: full int8's 7 dense layers (query, key, value, attention output,
  # intermediate, and the output's two: its outlier channels apart) int8; mixed's two
  # FFN ones read float32 through int8 weights, in XNNPACK like the others, and its
  # GELUs float32 where full int8's are int8.
  assert not [op for op, _ in dense["model_full_int8.tflite"] if "float32" in op]
  assert [op for op, _ in dense[MIXED]].count("FULLY_CONNECTED[float32/int8]") == 2 * layers
  assert all(delegated for _, delegated in dense[MIXED])
  assert len([op for op, _ in dense[MIXED] if "float32" not in op]) >= 4 * layers
  assert ops["model_full_int8.tflite"].count("GELU[int8]") == layers
  assert ops[MIXED].count("GELU[float32]") == layers
  # Those int8 weights, as the interpreter reads them: the FFN output's are its trained
  # kernels rounded with one scale per output channel (its largest |weight| / 127); the
  # intermediate's kernels were migrated first (this export's smoothing), so only their
  # rounding is checked: each output channel's largest weight at 127.
  kernels = {int(re.search(r"layer_(\d+)/", v.name).group(1)): v.numpy()
             for v in finetuned_model.model.variables
             if re.search(r"layer_\d+/output/kernel", v.name)}
  weights = ffn_dense_weights(out / MIXED, "output")
  assert sorted(weights) == sorted(kernels) == list(range(layers))
  for layer, (quantized, scales) in weights.items():
    kernel = kernels[layer].T  # LiteRT's dense weights are [outputs, inputs]
    np.testing.assert_allclose(scales, np.abs(kernel).max(axis=1) / 127, rtol=1e-6)
    assert np.abs(quantized).max() == 127
    assert np.all(np.abs(quantized * scales[:, None] - kernel) <= scales[:, None] * 0.5001)
  intermediate = ffn_dense_weights(out / MIXED, "intermediate")
  assert sorted(intermediate) == list(range(layers))
  for quantized, scales in intermediate.values():
    assert len(scales) == len(quantized) and np.all(np.abs(quantized).max(axis=1) == 127)
  assert os.path.getsize(out / MIXED) < 1.05 * os.path.getsize(out / "model_full_int8.tflite")
  texts = [[line.split("\t")[0] for line in open(shared_path(
      "glue", "SST-2", "dev.tsv"), encoding="utf-8").read().splitlines()[1:GLUE_DEV_ROWS + 1]]]
  runs = run_readers(out, ["model_float32.tflite", MIXED], texts)
  want = np.array(runs["model_float32.tflite"]["outputs"]["probabilities"])
  run = runs[MIXED]
  assert run["runtimes"] == ["ai_edge_litert"]
  got = np.array(run["outputs"]["probabilities"])
  assert np.mean(got.argmax(-1) == want.argmax(-1)) >= 0.95
  padded = {k: np.array(v, np.int32) for k, v in run["inputs"].items()}
  other = dict(padded, input_ids=np.where(padded["input_mask"] == 0, 1000,
                                          padded["input_ids"]))
  runner = Interpreter(model_path=str(out / MIXED)).get_signature_runner()
  np.testing.assert_allclose(runner(**other)["probabilities"],
                             runner(**padded)["probabilities"], atol=1e-6)


@pytest.mark.slow
def test_a_new_form_is_a_module_and_a_line(finetuned, tmp_path, monkeypatch, capsys):
  """The registry's contract: a form is an object with NAME, READER, refusal and write,
  and one line in WRITERS; tools.export_lite then offers it and writes it atomically."""
  _, trial = finetuned["glue/sst2"]
  monkeypatch.setattr(registry, "WRITERS", dict(registry.WRITERS))

  def write(job, folder, log):
    del log
    np.savez(os.path.join(folder, "weights.npz"),
             **{v.name: v.numpy() for v in job.finetuned.model.variables})
    return ["weights.npz"]
  form = types.SimpleNamespace(NAME="npz", READER=False, write=write,
                               refusal=lambda job: "" if job.finetuned.family.name ==
                               "sentence" else "npz takes sentence models")
  registry.WRITERS[form.NAME] = form
  out = tmp_path / "npz"
  assert export_lite.main(["--model-dir", trial, "--output", str(out), "--format",
                           "npz"]) == 0
  assert capsys.readouterr().out.strip() == f"wrote {out}: weights.npz"
  assert sorted(os.listdir(out)) == ["weights.npz"]
  saved = np.load(out / "weights.npz")
  model = source.load_finetuned(trial).model
  assert len(saved.files) == len(model.variables)
  for variable in model.variables:
    np.testing.assert_array_equal(saved[variable.name], variable.numpy())
  # A form's refusal is one line, before anything is written.
  form.refusal = lambda job: "npz takes no model today"
  assert refusal(capsys, "--model-dir", trial, "--output", tmp_path / "again", "--format",
                 "npz,litert") == f"error: {trial}: npz takes no model today"
  assert sorted(os.listdir(tmp_path)) == ["npz"]


@pytest.mark.slow
def test_the_other_forms_through_the_registry(finetuned, tmp_path, capsys):
  """saved_model, huggingface and original of one model into one folder: the
  SavedModel answers as the run's own, the transformers files are tools.export_hf's, the
  checkpoint holds the encoder's values under the original names."""
  _, trial = finetuned["glue/sst2"]
  out = tmp_path / "forms"
  assert export_lite.main(["--model-dir", trial, "--output", str(out), "--format",
                           "saved_model,huggingface,original"]) == 0
  assert "reader.py" not in capsys.readouterr().out
  texts = tf.constant(["a fine film", "dull and long", "it was"])
  ours = tf.saved_model.load(str(out / serving.SAVED_MODEL)).signatures["serving_default"]
  run = tf.saved_model.load(os.path.join(trial, serving.SAVED_MODEL)).signatures[
      "serving_default"]
  np.testing.assert_allclose(ours(text_a=texts)["probabilities"].numpy(),
                             run(text_a=texts)["probabilities"].numpy(), atol=1e-6)
  assert export_hf.main(["--checkpoint", trial, "--output", str(tmp_path / "hf")]) == 0
  for name in os.listdir(tmp_path / "hf"):
    assert (out / name).read_bytes() == (tmp_path / "hf" / name).read_bytes(), name
  model = source.load_finetuned(trial).model
  mapping = original_names.encoder_variables(model.encoder, "electra")
  prefix = str(out / "original" / "model.ckpt")
  assert {n for n, _ in tf.train.list_variables(prefix)} == {n for n, _, _ in mapping}
  for name, variable, shape in mapping:
    np.testing.assert_array_equal(tf.train.load_variable(prefix, name),
                                  np.reshape(variable.numpy(), shape))


@pytest.mark.slow
def test_only_the_variants_asked_for_are_written(finetuned, tmp_path):
  """A writer's variants (its FORMS) chosen: only their files, and no calibration read
  when no calibrated variant is asked for."""
  _, trial = finetuned["glue/sst2"]
  out = tmp_path / "some"
  files = registry.export(trial, str(out), ["litert", "onnx"], log=lambda _: None,
                          variants={"litert": ["float32"], "onnx": ["dynamic_int8"]})
  assert sorted(os.path.basename(f) for f in files) == [
      "model_dynamic_int8.onnx", "model_float32.tflite"]
  assert sorted(n for n in os.listdir(out) if n.startswith("model_")) == [
      "model_dynamic_int8.onnx", "model_float32.tflite"]
  assert json.loads((out / "deploy.json").read_text())["calibration_examples"] == 0
  for variants, message in (
      ({"litert": ["int4"]}, "variants of litert: int4; expected some of float32, "
       "dynamic_int8, full_int8"),
      ({"onnx": ["float32"]}, "variants of onnx, which is not among the forms exported "
       "(litert, original)"),
      ({"original": ["x"]}, "variants of original: x; expected some of none (it has one)")):
    with pytest.raises(ValueError) as refused:
      registry.export(trial, str(tmp_path / "refused"), ["litert", "original"],
                      variants=variants)
    assert str(refused.value) == message
  assert not (tmp_path / "refused").exists()
