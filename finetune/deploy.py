"""Deployment exports of a fine-tuned sentence model: LiteRT flatbuffers and ONNX files.

A fine-tuned model directory (<model_dir>_<trial>, holding finetuning_config.json and
its checkpoint) becomes a folder that runs without TensorFlow or this repository:
- model_float32.tflite, model_dynamic_int8.tflite (int8 weights, float activations) and
  model_full_int8.tflite (int8 weights and activations, their ranges calibrated on a
  sample of the task's training split) for LiteRT (ai-edge-litert);
- model_float32.onnx and model_dynamic_int8.onnx (onnxruntime's dynamic quantization)
  for onnxruntime, converted by tf2onnx;
- vocab.txt, deploy.json (task, labels, lengths, lower-casing, files) and reader.py
  (finetune/deploy_reader.py) with the project's tokenizer and featurization modules it
  imports, copied as they are.
Each model takes the token-ids signature input_ids, input_mask, segment_ids [B, L]
int32 and returns the SavedModel's numbers: probabilities and label_id, or score.
The WordPiece step stays outside: in the graph it needs TensorFlow ops that LiteRT's
builtin ops lack (docs/deploying.md lists them; ai-edge-litert's
interpreter has no Select-TF-ops runtime to run them).

The folder is written beside its destination and renamed into place when whole.
"""

import contextlib
import dataclasses
import fcntl
import json
import os
import re
import shutil
import tempfile
from typing import Dict, List, Optional

import numpy as np
import tensorflow as tf

from data_prep.tokenizer import Tokenizer
from data_prep.vocab import load_vocab
from finetune import tasks as task_registry
from finetune.modeling import FinetuningModel
from finetune.runner import TaskRunner
from finetune.sentence import features as sentence_features
from finetune.sentence import family as sentence_family
from finetune.sentence.files import unlabeled_layout
from finetune.sentence.serving import numeric_outputs
from model.config import ModelConfig
from model.weights import CheckpointError, huggingface, original
from model.weights.run_files import (FINETUNING_RECORD, PRETRAINING_RECORD, newest_readable,
                                     read_record, recorded_vocab)

LITERT_FORMS = ("float32", "dynamic_int8", "full_int8")
ONNX_FORMS = ("float32", "dynamic_int8")
FORMATS = {"litert": (LITERT_FORMS, ".tflite"), "onnx": (ONNX_FORMS, ".onnx")}
INFO_FILE = "deploy.json"
READER = "reader.py"
INPUTS = ("input_ids", "input_mask", "segment_ids")
# The reader's own imports, shipped beside it (bundle path: repository path).
READER_SOURCES = {READER: "finetune/deploy_reader.py",
                  **{p: p for p in ("data_prep/__init__.py", "data_prep/reference_tokenizer.py",
                                    "data_prep/tokenizer.py", "data_prep/vocab.py",
                                    "finetune/__init__.py", "finetune/sentence/__init__.py",
                                    "finetune/sentence/features.py")}}
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ONNX_OPSET = 17
# The variable every TensorFlow 2 object-graph checkpoint holds (a training run's).
OBJECT_GRAPH = "_CHECKPOINTABLE_OBJECT_GRAPH"


def file_name(format_name: str, form: str) -> str:
  return f"model_{form}{FORMATS[format_name][1]}"


@dataclasses.dataclass
class Finetuned:
  """A fine-tuned model directory, loaded: its Keras model and what it was trained with."""
  folder: str
  model: FinetuningModel
  task: object
  runner: TaskRunner
  sizes: ModelConfig
  settings: Dict[str, object]
  vocab_file: str  # the vocabulary its training read


  @property
  def max_seq_length(self) -> int:
    return self.settings["max_seq_length"]

  def tokenizer(self) -> Tokenizer:
    lower = self.settings["do_lower_case"]
    return Tokenizer(load_vocab(self.vocab_file), lower, lower)


def load_finetuned(folder: str, need_sentence_task: str = "", note=print) -> Finetuned:
  """The fine-tuned model of a trial directory, its weights all read from its newest
  checkpoint that reads whole. `need_sentence_task`: what needs one sentence task's
  model (the refusal of any other says so). A lost or empty record is rebuilt from the
  copy its checkpoints carry, said through `note`."""
  if not os.path.isfile(os.path.join(folder, FINETUNING_RECORD)):
    pretrained = ("a pre-training model dir"
                  if os.path.isfile(os.path.join(folder, PRETRAINING_RECORD))
                  else _pretrained_weights(folder))
    if pretrained:
      raise ValueError(f"{folder} is {pretrained}, not a fine-tuned model; fine-tune it "
                       f"first (python run_finetuning.py --task TASK --init-checkpoint "
                       f"{folder}) and give the fine-tuned trial's dir (<model_dir>_1)")
  saved = read_record(folder, FINETUNING_RECORD, note=note)
  if saved is None:
    trial = f"{folder.rstrip(os.sep)}_1"
    hint = (f"; did you mean {trial}?" if os.path.isfile(os.path.join(trial, FINETUNING_RECORD))
            else "; give a trial dir of run_finetuning.py (<model_dir>_<trial>)")
    raise ValueError(f"{folder} is not a fine-tuned model dir (no {FINETUNING_RECORD})"
                     + hint)
  settings, sizes = saved["finetuning"], ModelConfig(**saved["model"])
  names = settings["task_names"]
  task = task_registry.get_task(names[0])
  if need_sentence_task and (
      len(names) != 1 or task_registry.family_of(task) is not sentence_family.FAMILY):
    raise ValueError(f"{folder}: fine-tuned on {','.join(names)}; {need_sentence_task}")
  latest = newest_readable(folder, note)
  if not latest:
    raise ValueError(f"{folder}: holds {FINETUNING_RECORD} but no checkpoint")
  vocab_file = recorded_vocab(folder, saved)
  if not os.path.isfile(vocab_file):
    raise ValueError(f"{os.path.join(folder, FINETUNING_RECORD)}: the vocabulary it names, "
                     f"{vocab_file or '(none)'}, does not exist; put the vocab.txt the model "
                     f"was trained with at {os.path.join(folder, 'vocab.txt')}")
  runner = task_registry.runner_for(task, None, None)
  model = FinetuningModel(sizes, {runner.head_name: runner.make_head(sizes)})
  model.build_variables()
  # Every weight of the model must come from the checkpoint (its optimizer slots do not).
  tf.train.Checkpoint(model=model).restore(latest).assert_existing_objects_matched() \
      .expect_partial()
  return Finetuned(folder, model, task, runner, sizes, settings, vocab_file)


def _pretrained_weights(folder: str) -> str:
  """What pre-trained weights `folder` holds (a pre-training export, a release, a Hugging
  Face directory), or "" (a fine-tuned trial's checkpoints are TensorFlow 2's object
  graph, whose record read_record looks for)."""
  try:
    if huggingface.locate(folder):
      return "a Hugging Face ELECTRA directory (pre-trained weights)"
    prefix = original.locate(folder)
    names = {name for name, _ in tf.train.list_variables(prefix)} if prefix else set()
  except (CheckpointError, tf.errors.OpError, ValueError):
    return ""
  if names and OBJECT_GRAPH not in names:
    return ("a pre-training export (pre-trained weights in the original checkpoint "
            "format)")
  return ""


def token_ids_function(finetuned: Finetuned):
  """The model as a tf.function of the token-ids signature, outputs as the SavedModel's."""
  spec = [tf.TensorSpec([None, finetuned.max_seq_length], tf.int32, name=name)
          for name in INPUTS]
  model, head, task = finetuned.model, finetuned.runner.head_name, finetuned.task

  def call(input_ids, input_mask, segment_ids):
    batch = {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids}
    return numeric_outputs(task, model(batch, training=False)[head])
  return tf.function(call, input_signature=spec, autograph=False)


def representative_features(finetuned: Finetuned, size: int, data_dir: str = "",
                            seed: int = 0) -> Dict[str, np.ndarray]:
  """Model inputs of `size` examples drawn (seeded) from the task's training split."""
  task = finetuned.task
  data_dir = data_dir or finetuned.settings["data_dir"]
  # (A missing or empty split is refused by the reader, naming its file.)
  examples = task_registry.read_examples(task, data_dir, task.train_split)
  chosen = np.random.default_rng(seed).permutation(len(examples))[:size]
  return sentence_features.encode(finetuned.tokenizer(), [examples[i] for i in chosen],
                                  finetuned.max_seq_length)


class UnsupportedOpError(ValueError):
  """The model holds ops that the target runtime cannot run."""


# Kept float32 in the full-int8 model (matched on the float model's tensor names):
# - the attention mask's terms ((1 - mask) * -1e9), the masked scores and the softmax
#   after them: calibrated to int8, the -1e9 range makes every real score one value, and
#   the converter gave 1 - mask the product's range, so it quantized to 0 and padding
#   was not masked (measured on a tiny SST-2 model: labels flipped);
# - the position embeddings' broadcast: its int8 output took other quantization
#   parameters than its input, which a broadcast copies unchanged (relative error 0.9);
#   with these two kept int8, 35% of a tiny SST-2 model's dev labels stayed the float
#   model's, without them 96.5%;
# - the layer norms and the attention's two batched matmuls: LiteRT's XNNPACK delegate
#   (ai-edge-litert 2.3.0) did not take their int8 SUB, SQUARED_DIFFERENCE, RSQRT and
#   BATCH_MATMUL, so in int8 they ran on LiteRT's reference kernels (perf: ~68% of an
#   electra_small's time) and split the graph into 116 delegate partitions; in float32
#   XNNPACK takes them, between the int8 dense layers (bench/RESULTS.md;
#   tools.litert_ops lists them).
_FLOAT_NODES = re.compile(r"self_attention/softmax(_\d+)?/(sub|mul|add|Softmax)$"
                          r"|embeddings/position_embeddings/"
                          r"|layer_norm/"
                          r"|self_attention/einsum(_1)?/Einsum\d*$")


def to_litert(function, variables, form: str,
              calibration: Optional[Dict[str, np.ndarray]] = None) -> bytes:
  """A LiteRT flatbuffer of `function` (its builtin ops only) in one of LITERT_FORMS;
  full_int8 calibrates on `calibration`'s rows."""
  def converter():
    made = tf.lite.TFLiteConverter.from_concrete_functions(
        [function.get_concrete_function()], _Holder(variables))
    if form != "float32":
      made.optimizations = [tf.lite.Optimize.DEFAULT]
    return made
  try:
    if form != "full_int8":
      return converter().convert()
    from ai_edge_litert.interpreter import Interpreter  # pylint: disable=import-outside-toplevel
    names = [t["name"] for t in Interpreter(model_content=to_litert(
        function, variables, "float32")).get_tensor_details() if _FLOAT_NODES.search(t["name"])]
    rows = len(next(iter(calibration.values())))
    samples = lambda: ({k: v[i:i + 1] for k, v in calibration.items()} for i in range(rows))
    quantized = converter()
    quantized.representative_dataset = samples
    quantized.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    # The debugger's converter is the converter's API for keeping named nodes float.
    return tf.lite.experimental.QuantizationDebugger(
        converter=quantized, debug_dataset=samples,
        debug_options=tf.lite.experimental.QuantizationDebugOptions(
            denylisted_nodes=names)).get_nondebug_quantized_model()
  except Exception as e:  # pylint: disable=broad-except  # the converter's own class
    ops = sorted({error.operator.name for error in getattr(e, "errors", [])
                  if error.operator.name})
    if not ops:
      raise
    raise UnsupportedOpError(f"LiteRT ({form}) has no builtin kernel for "
                             f"{', '.join(ops)}") from None


class _Holder(tf.Module):
  """Keeps the variables the converted function reads (the converter's trackable)."""

  def __init__(self, variables):
    super().__init__()
    self.held = list(variables)


def to_onnx(function, path: str):
  """A float32 ONNX file of `function` at `path` (tf2onnx)."""
  # Imported here: tf2onnx and onnx load only when an ONNX file is asked for.
  import onnx  # pylint: disable=import-outside-toplevel
  import tf2onnx  # pylint: disable=import-outside-toplevel

  def erfc(ctx, node, name, args):
    """erfc(x) = 1 - erf(x): TensorFlow's exact GELU calls Erfc, which ONNX lacks."""
    del name, args
    node.type = "Erf"
    one = ctx.make_const(tf2onnx.utils.make_name("one"), np.array(1, np.float32))
    ctx.insert_new_node_on_output("Sub", node.output[0], tf2onnx.utils.make_name("erfc"),
                                  inputs=[one.output[0], node.output[0]])
  proto, _ = tf2onnx.convert.from_function(
      function, input_signature=function.input_signature, opset=ONNX_OPSET,
      custom_op_handlers={"Erfc": (erfc, [])})
  # tf2onnx leaves an op it cannot map in the graph, saying so only in its log.
  unknown = sorted({n.op_type for n in proto.graph.node
                    if not onnx.defs.has(n.op_type, n.domain)})
  if unknown:
    raise UnsupportedOpError(f"ONNX has no operator for {', '.join(unknown)}")
  onnx.save(proto, path)


def quantize_onnx(source: str, path: str):
  """onnxruntime's dynamic quantization of the float ONNX file `source`: int8 weights,
  activations quantized at run time. (Every weight matrix: on electra_small the file
  went from 52% of the float one, quantizing tf2onnx's graph as it came, to 22%.)"""
  import onnx  # pylint: disable=import-outside-toplevel
  from onnxruntime.quantization import QuantType, quantize_dynamic  # pylint: disable=import-outside-toplevel
  from onnxruntime.quantization.shape_inference import quant_pre_process  # pylint: disable=import-outside-toplevel
  # Constant folding first: tf2onnx leaves the attention's weights behind a Reshape whose
  # shape is computed, and the quantizer takes only constant weights (without it 48 of
  # electra_small's weight matrices stayed float32). Its symbolic shape inference stops
  # on tf2onnx's graph, and the folding does not need it.
  with tempfile.TemporaryDirectory() as tmp:
    folded = os.path.join(tmp, "folded.onnx")
    quant_pre_process(source, folded, skip_symbolic_shape=True)
    proto = onnx.load(folded)
  gemms_as_matmuls(proto.graph)
  onnx.checker.check_model(proto)
  quantize_dynamic(proto, path, weight_type=QuantType.QInt8)


def gemms_as_matmuls(graph):
  """Rewrites each Gemm of `graph` with a constant weight as MatMul then Add, in place.

  tf2onnx writes a dense layer on a 2-D input as Gemm, and onnxruntime's dynamic
  quantization (1.32) has no integer Gemm: those weights stayed float32.
  """
  from onnx import helper, numpy_helper  # pylint: disable=import-outside-toplevel
  weights = {w.name: w for w in graph.initializer}
  nodes = []
  for node in graph.node:
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    has_bias = len(node.input) > 2 and node.input[2]
    if (node.op_type != "Gemm" or node.input[1] not in weights or attrs.get("transA", 0)
        or attrs.get("alpha", 1.0) != 1.0
        or (has_bias and attrs.get("beta", 1.0) != 1.0)):
      nodes.append(node)
      continue
    weight = node.input[1]
    if attrs.get("transB", 0):
      kernel = numpy_helper.from_array(
          numpy_helper.to_array(weights[weight]).T.copy(), f"{node.name}/kernel")
      graph.initializer.append(kernel)
      weight = kernel.name
    product = f"{node.name}/matmul" if has_bias else node.output[0]
    nodes.append(helper.make_node("MatMul", [node.input[0], weight], [product],
                                  name=f"{node.name}/MatMul"))
    if has_bias:
      nodes.append(helper.make_node("Add", [product, node.input[2]], [node.output[0]],
                                    name=f"{node.name}/Add"))
  del graph.node[:]
  graph.node.extend(nodes)
  used = {i for n in graph.node for i in n.input}
  kept = [w for w in graph.initializer if w.name in used]
  del graph.initializer[:]
  graph.initializer.extend(kept)


def export(folder: str, output: str, formats: List[str], calibration_size: int = 256,
           data_dir: str = "", seed: int = 0, log=print) -> List[str]:
  """Writes the export folder `output` (refused if it exists); its model files."""
  if os.path.lexists(output):
    raise ValueError(f"{output} exists; give a new output folder")
  finetuned = load_finetuned(
      folder, "the LiteRT and ONNX exports take one sentence classification or "
      "regression task's model (their reader builds a sentence task's inputs)")
  calibration = (representative_features(finetuned, calibration_size, data_dir, seed)
                 if "litert" in formats else None)
  function = token_ids_function(finetuned)
  parent = os.path.dirname(os.path.abspath(output))
  os.makedirs(parent, exist_ok=True)
  remove_stale_exports(parent, log)
  tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(output)}.", dir=parent)
  umask = os.umask(0)
  os.umask(umask)
  os.chmod(tmp, 0o777 & ~umask)  # mkdtemp's is 0700; the folder gets the usual one
  written, doing = [], "starting"
  try:
    with _in_progress(tmp) as finish:
      for format_name in formats:
        for form in FORMATS[format_name][0]:
          name = file_name(format_name, form)
          path, doing = os.path.join(tmp, name), f"writing {name}"
          if format_name == "litert":
            with open(path, "wb") as f:
              f.write(to_litert(function, finetuned.model.variables, form, calibration))
          elif form == "float32":
            to_onnx(function, path)
          else:  # after float32 (ONNX_FORMS' order)
            quantize_onnx(os.path.join(tmp, file_name("onnx", "float32")), path)
          written.append(name)
          log(f"converted {name} ({os.path.getsize(path) / 2**20:.1f} MiB)")
      doing = "writing vocab.txt, deploy.json and reader.py"
      _write_reader(finetuned, tmp, written, calibration_size if calibration else 0)
      doing = "renaming the finished folder into place"
      finish(output)
  except OSError as e:
    shutil.rmtree(tmp, ignore_errors=True)
    if e.filename is not None and not e.filename.startswith(tmp):
      raise  # an input's, named
    # A write's error names no file (a full disk: "File too large"), or the
    # temporary folder's: say what was being written, and that nothing was left.
    raise OSError(e.errno, f"{e.strerror or e} ({doing}); nothing was written (the "
                  "partial export was removed)", output) from None
  except BaseException:
    shutil.rmtree(tmp, ignore_errors=True)
    raise
  return [os.path.join(output, name) for name in written]


# A file inside an export's temporary folder, locked (flock) while its process lives: a
# folder whose lock can be taken is left by an export that was killed.
IN_PROGRESS = ".export_in_progress"


@contextlib.contextmanager
def _in_progress(tmp: str):
  """Holds `tmp`'s lock for the block; yields finish(output), which renames the whole
  folder into place, then takes the lock file out of it."""
  with open(os.path.join(tmp, IN_PROGRESS), "w", encoding="utf-8") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)

    def finish(output: str):
      # Renamed first, released after: a later export never finds this folder both
      # unlocked and still at its temporary name.
      os.rename(tmp, output)
      os.remove(os.path.join(output, IN_PROGRESS))
    yield finish


def remove_stale_exports(parent: str, log=print):
  """Removes the temporary folders that killed exports left in `parent` (their lock
  free), saying so."""
  for entry in os.listdir(parent):
    folder = os.path.join(parent, entry)
    marker = os.path.join(folder, IN_PROGRESS)
    if not entry.startswith(".") or not os.path.isfile(marker):
      continue
    try:
      with open(marker, encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        shutil.rmtree(folder, ignore_errors=True)
    except OSError:  # held: a live export's; or gone meanwhile
      continue
    log(f"removed {folder}, the temporary folder of an export that was stopped before "
        "it finished")


def _write_reader(finetuned: Finetuned, folder: str, files: List[str], calibrated: int):
  """vocab.txt, deploy.json and the reader with the modules it imports."""
  task, settings = finetuned.task, finetuned.settings
  shutil.copyfile(finetuned.vocab_file, os.path.join(folder, "vocab.txt"))
  pair = unlabeled_layout(task)[1].text_b is not None
  info = {"task": task.name, "labels": list(task.labels or []), "pair": pair,
          "regression": task.is_regression, "lower_case": settings["do_lower_case"],
          "max_seq_length": finetuned.max_seq_length, "inputs": list(INPUTS),
          "models": files, "calibration_examples": calibrated,
          "source": os.path.abspath(finetuned.folder)}
  with open(os.path.join(folder, INFO_FILE), "w", encoding="utf-8") as f:
    json.dump(info, f, indent=2)
  for target, source in READER_SOURCES.items():
    os.makedirs(os.path.dirname(os.path.join(folder, target)), exist_ok=True)
    shutil.copyfile(os.path.join(_ROOT, source), os.path.join(folder, target))
