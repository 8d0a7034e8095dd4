"""Helpers shared by the export tests (test_serving.py, test_deploy.py,
test_deploy_tasks.py, test_bench_inference.py, test_export_hf.py, test_smoothing.py,
test_int8_qat.py): running an export in a process without the project, the tiny GLUE,
SQuAD and chunking fine-tunings (and their models, and the SST-2 model's export, shared
by the tests that only read them), an activation outlier put into a model, --predict's
records of a questions file, tools.export_lite's exports and one-line refusals."""

import atexit
import contextlib
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import pytest
import tf_keras

from export import litert
from finetune import config as finetune_config
from finetune import predict, trainer
from model.internals import block_layers
from tests.helpers import (as_v2, chunk_data, head_of, shared_folder, shared_path,
                           squad_subset, write_json, write_tiny_pretrained_model)
from tools import export_lite

# Words that BERT's cleaning, lower-casing, accent stripping or punctuation split change,
# a word it empties (U+200B) and one that is [UNK] (U+2603).
ODD_CONTEXT = ("Born (1895-1943). U.S.-based  na\u00efve-Caf\u00e9's \u2603 aa-a a,a,a "
               "\u0130stanbul \ud55c\uad6d\uc5b4 x\u200by \u200b \ufb01ne \u03a3\u0391\u03a3. "
               "Hello, world! It's 3.14 -- well... \u201cquoted\u201d; \u00e7a-va?")

# Loads SavedModels with nothing of the project importable and calls their signatures:
# per line on stdin, a JSON list of calls; per line on stdout, their outputs (or the
# traceback of a call that failed). One process serves every call of a test process:
# TensorFlow starts once, and a SavedModel several tests call is loaded once.
LOADER = """
import json, os, sys, traceback
import tensorflow as tf
import tensorflow_text  # registers the tokenizer's ops
assert not any(os.path.isdir(os.path.join(p or ".", "finetune")) for p in sys.path), sys.path
loaded = {}
for line in sys.stdin:
  out = []
  try:
    for calls in json.loads(line):
      path = calls.pop("path")
      if path not in loaded:
        loaded[path] = tf.saved_model.load(path)
      out.append({})
      for name, inputs in calls.items():
        result = loaded[path].signatures[name](**{k: tf.constant(v) for k, v in inputs.items()})
        out[-1][name] = {k: v.numpy().tolist() if v.dtype != tf.string else
                         [x.decode() for x in v.numpy().ravel()] for k, v in result.items()}
    reply = {"outputs": out}
  except Exception:  # the test fails with it; the process serves the next
    reply = {"error": traceback.format_exc()}
  print(json.dumps(reply), flush=True)
"""
_clean_loader = []  # [(the LOADER process, its stderr file)] once started


def call_in_clean_process(*calls):
  """The outputs of SavedModel signatures called in a process without the project: per
  call ({"path": the SavedModel, signature name: its inputs, ...}) a dict of each
  signature's outputs. The SavedModels must not change during the test session (each is
  loaded once)."""
  if not _clean_loader:
    folder = tempfile.mkdtemp(prefix="clean_loader_")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # stderr to a file: a pipe nobody reads could fill and stop the process.
    err = open(os.path.join(folder, "stderr"), "w+", encoding="utf-8")  # pylint: disable=consider-using-with
    process = subprocess.Popen([sys.executable, "-I", "-c", LOADER], cwd=folder, env=env,  # pylint: disable=consider-using-with
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=err, text=True)
    _clean_loader.append((process, err))
    atexit.register(_stop_clean_loader, folder)
  process, err = _clean_loader[0]
  process.stdin.write(json.dumps(calls) + "\n")
  process.stdin.flush()
  line = process.stdout.readline()
  while line and not line.startswith("{"):  # anything else a library printed
    line = process.stdout.readline()
  if not line:
    err.seek(0)
    pytest.fail(f"the clean loader exited with {process.wait()}:\n{err.read()[-2000:]}")
  reply = json.loads(line)
  assert "error" not in reply, reply["error"]
  return reply["outputs"]


def _stop_clean_loader(folder):
  process, err = _clean_loader.pop()
  process.stdin.close()
  try:
    process.wait(timeout=30)
  except subprocess.TimeoutExpired:
    process.kill()
    process.wait()
  process.stdout.close()
  err.close()
  shutil.rmtree(folder, ignore_errors=True)


# Runs model files through the export folder's reader with nothing of the project or
# TensorFlow importable; prints, per model file, the reader's inputs of the arguments (a
# JSON list on stdin), the model's outputs, its outputs on those inputs padded to
# max_seq_length, the reader's records, the inputs' shapes the file declares (None where
# any size) and which runtimes were imported.
RUNNER = """
import json, os, sys
folder, names = sys.argv[1], sys.argv[2:]
sys.path[:] = [folder] + [p for p in sys.path if "site-packages" in p or "lib/python" in p]
import numpy as np
import reader

def declared(path):
  if path.endswith(".tflite"):
    from ai_edge_litert.interpreter import Interpreter
    shapes = {k: d["shape_signature"].tolist() for k, d in Interpreter(
        model_path=path).get_signature_runner().get_input_details().items()}
  else:
    import onnxruntime
    shapes = {i.name: i.shape for i in onnxruntime.InferenceSession(
        path, providers=["CPUExecutionProvider"]).get_inputs()}
  return {k: [d if isinstance(d, int) and d > 0 else None for d in shape]
          for k, shape in shapes.items()}

args = json.load(sys.stdin)
r = reader.Reader(folder)
inputs = r.inputs(*args)
padded = {k: np.pad(v, [(0, 0), (0, r.info["max_seq_length"] - v.shape[1])])
          for k, v in inputs.items()}
got = {}
for name in names:
  model = reader.load_model(os.path.join(folder, name))
  outputs = model(inputs)
  got[name] = {"inputs": {k: v.tolist() for k, v in inputs.items()},
               "outputs": {k: v.tolist() for k, v in outputs.items()},
               "padded_outputs": {k: v.tolist() for k, v in model(padded).items()},
               "records": r.records(outputs),
               "declared": declared(os.path.join(folder, name))}
assert not [m for m in sys.modules if m.startswith(("tensorflow", "tf_keras", "util"))]
for run in got.values():
  run.update(tokenizer=sys.modules["data_prep.tokenizer"].__file__,
             runtimes=[m for m in ("ai_edge_litert", "onnxruntime") if m in sys.modules])
print(json.dumps(got))
"""


def run_readers(folder, names, args):
  """Per model file of `names` in the export `folder`, what RUNNER prints for it: one
  process per runtime (the .tflite files together, the .onnx ones together), so each
  file runs with its own runtime alone."""
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  got = {}
  for extension in (".tflite", ".onnx"):
    group = [name for name in names if name.endswith(extension)]
    if not group:
      continue
    result = subprocess.run([sys.executable, "-c", RUNNER, str(folder), *group],
                            input=json.dumps(args), cwd=folder, env=env,
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    got.update(json.loads(result.stdout.strip().splitlines()[-1]))
  assert sorted(got) == sorted(names), names
  return got


def export_all(trial, output, formats, *flags):
  """tools.export_lite of `trial` in `formats` (64 calibration examples; `flags`) to
  `output`: (what it printed, the LiteRT conversions it made, in order)."""
  converted, to_litert, printed = [], litert.to_litert, io.StringIO()
  with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(printed):
    patch.setattr(litert, "to_litert", lambda *args, **kwargs: converted.append(
        args[2]) or to_litert(*args, **kwargs))
    assert export_lite.main(["--model-dir", trial, "--output", str(output), "--format",
                             formats, "--calibration-examples", "64", *flags]) == 0
  return printed.getvalue(), converted


def refusal(capsys, *argv):
  """tools.export_lite's one-line error for `argv` (exit 2)."""
  capsys.readouterr()
  assert export_lite.main(list(map(str, argv))) == 2
  err = capsys.readouterr().err
  assert err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
  return err.strip()


# No curves (in these helpers' runs): no test reads them.
QA = {"max_seq_length": 64, "max_query_length": 16, "doc_stride": 24, "beam_size": 6,
      "n_best_size": 4, "max_answer_length": 10, "train_batch_size": 16,
      "num_train_epochs": 1.0, "learning_rate": 1e-3, "do_eval": False,
      "write_curves": False}


def squad_articles():
  with open(shared_path("squad", "dev-v1.1.json"), encoding="utf-8") as f:
    return json.load(f)["data"]


def squad_config(tmp_path, task, overrides):
  return finetune_config.load_config("tiny", [task], str(tmp_path / "data"),
                                     {**QA, **overrides})


def fine_tune_squad(tmp_path, task, folder, overrides):
  """(config, SQuAD dev articles) of a tiny one-layer model fine-tuned on 12 questions
  of the first article (<tmp_path>/data); its dev split (read when do_eval) is 6 questions of
  the third (SQuAD 2.0: and 2 without an answer)."""
  articles = squad_articles()
  data = tmp_path / "data"
  train, dev = squad_subset(articles[:1], 4, 3), squad_subset(articles[2:3], 2, 3)
  for name, document in (("train", train), ("dev", dev)):
    write_json(data / "finetuning_data" / folder / f"{name}.json",
               as_v2(document) if task == "squad/v2.0" else document)
  write_tiny_pretrained_model(data, layers=1)
  config = squad_config(tmp_path, task, overrides)
  trainer.run(config, log=lambda _: None)
  return config, articles


# transformers' QA head: starts and ends scored apart, no answerability classifier; the
# run scores its dev split. A threshold no null score passes: answers are the decoded
# texts, not "no answer" (which this tiny model's null scores would give every question).
TRANSFORMERS_QA_HEAD = {"joint_prediction": False, "answerable_classifier": False,
                        "do_eval": True, "qa_na_threshold": 1000.0}


def shared_squad_model(tmp_path_factory, task, folder, overrides=None):
  """fine_tune_squad's model of `task` (with the default head, or `overrides`), seeded:
  (config, articles). Trained once per test session (conftest.shared_folder)."""
  overrides = overrides or {}
  key = hashlib.sha1(json.dumps(overrides, sort_keys=True).encode()).hexdigest()[:8]

  def train(home):
    tf_keras.utils.set_random_seed(0)
    fine_tune_squad(home, task, folder, overrides)
  home = shared_folder(tmp_path_factory, f"squad_model_{folder}_{key}", train)
  return squad_config(home, task, overrides), squad_articles()


GLUE_FOLDERS = {"glue/sst2": "SST-2", "glue/stsb": "STS-B"}
GLUE_DEV_ROWS = 48


def shared_glue_models(tmp_path_factory):
  """{task: (FinetuningConfig, its trial dir)} of a tiny random one-layer model
  fine-tuned (2 epochs) on the first 96 rows of SST-2 (single sentences) and of STS-B
  (pairs, regression), their dev splits the first GLUE_DEV_ROWS rows, seeded. Trained
  once per test session (conftest.shared_folder)."""
  def train(data):
    # Fixed weights: the int8 checks compare labels near a random model's 0.5 boundary,
    # so a different draw each run could pass one run and fail the next.
    tf_keras.utils.set_random_seed(0)
    write_tiny_pretrained_model(data, layers=1)
    for task, folder in GLUE_FOLDERS.items():
      for split, rows in (("train", 97), ("dev", GLUE_DEV_ROWS + 1)):
        head_of(shared_path("glue", folder, f"{split}.tsv"),
                data / "finetuning_data" / folder / f"{split}.tsv", rows)
      trainer.run(glue_config(data, task), log=lambda _: None)
  data = shared_folder(tmp_path_factory, "glue_models", train)
  configs = {task: glue_config(data, task) for task in GLUE_FOLDERS}
  return {task: (config, f"{config.model_dir}_1") for task, config in configs.items()}


SST2_SMOOTHING_ALPHA = 0.5


def shared_sst2_export(tmp_path_factory):
  """(folder, export_all's printed lines and conversions) of shared_glue_models' SST-2
  model in every deployment form and litert_mixed_int8, the calibrated forms' outliers
  migrated (export/smoothing.py: alpha SST2_SMOOTHING_ALPHA). Exported once per test
  session (conftest.shared_folder); readers copy what they would change."""
  _, trial = shared_glue_models(tmp_path_factory)["glue/sst2"]

  def export(home):
    printed, converted = export_all(trial, home / "export", "all,litert_mixed_int8",
                                    "--smoothing-alpha", str(SST2_SMOOTHING_ALPHA))
    write_json(home / "export_all.json", [printed, converted])
  home = shared_folder(tmp_path_factory, "sst2_export", export)
  printed, converted = json.loads((home / "export_all.json").read_text())
  return home / "export", printed, converted


def add_outlier_channel(finetuned, channel: int = 3, factor: float = 20.0):
  """An activation outlier, as real pre-trained encoders have, in `finetuned`'s first
  layer: its attention LayerNorm's `channel` `factor` times larger and the FFN kernel's
  row reading it `factor` times smaller (the FFN's input carries it, and the residual
  sum after the FFN)."""
  layers = block_layers(finetuned.model.encoder.transformer_layers[0])
  outlier = np.arange(layers.attention_norm.gamma.shape[0]) == channel
  for variable in (layers.attention_norm.gamma, layers.attention_norm.beta):
    variable.assign(variable.numpy() * np.where(outlier, factor, 1.0).astype(np.float32))
  kernel = layers.intermediate.kernel.numpy()
  kernel[outlier] /= factor
  layers.intermediate.kernel.assign(kernel)


# shared_glue_models' hparams (--hparams of a command reading its models).
GLUE = {"train_batch_size": 16, "max_seq_length": 32, "num_train_epochs": 2.0,
        "learning_rate": 1e-3, "do_eval": False, "write_curves": False}


def glue_config(data, task):
  return finetune_config.load_config("tiny", [task], str(data), GLUE)


# max_seq_length 24 reads the longer sentences in windows, one every 8 pieces.
CHUNK = {"train_batch_size": 16, "max_seq_length": 24, "tagging_stride": 8,
         "num_train_epochs": 2.0, "learning_rate": 1e-3, "write_curves": False}


def shared_chunk_model(tmp_path_factory):
  """The config of a tiny one-layer model fine-tuned on the first 64 CoNLL-2000 training
  sentences (2 epochs), its dev split the first 24 test sentences (scored by the run),
  seeded. Trained once per test session (conftest.shared_folder)."""
  def train(home):
    tf_keras.utils.set_random_seed(0)
    chunk_data(home, 64, 24, layers=1)
    trainer.run(chunk_config(home), log=lambda _: None)
  return chunk_config(shared_folder(tmp_path_factory, "chunk_model", train))


def shared_chunk_export(tmp_path_factory):
  """The folder of tools.export_lite's files of shared_chunk_model's model in every
  deployment form (32 calibration examples). Exported once per test session
  (conftest.shared_folder); readers copy what they would change."""
  trial = f"{shared_chunk_model(tmp_path_factory).model_dir}_1"

  def export(home):
    assert export_lite.main(["--model-dir", trial, "--output", str(home / "export"),
                             "--format", "all", "--calibration-examples", "32"]) == 0
  return shared_folder(tmp_path_factory, "chunk_export", export) / "export"


def chunk_config(home):
  return finetune_config.load_config("tiny", ["chunk"], str(home / "data"), CHUNK)


# The functions above returning models trained once per session: conftest.py runs the
# modules that import one together, on one pytest-xdist worker.
SHARED_MODELS = ("shared_squad_model", "shared_glue_models", "shared_chunk_model",
                 "shared_sst2_export", "shared_chunk_export")


def predict_questions(tmp_path, config, questions):
  """The questions' file (<tmp_path>/questions.jsonl) and --predict's records of it."""
  path = tmp_path / "questions.jsonl"
  path.write_text("".join(json.dumps({"question": q, "context": c}) + "\n"
                          for q, c in questions), encoding="utf-8")
  out = io.StringIO()
  predict.predict_file(config, str(path), out, log=lambda _: None)
  return path, [json.loads(line) for line in out.getvalue().splitlines()]
