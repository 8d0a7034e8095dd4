"""LiteRT flatbuffers for ai-edge-litert: model_float32.tflite, model_dynamic_int8.tflite
(int8 weights, float activations) and model_full_int8.tflite (int8 weights and
activations, their ranges calibrated on a seeded sample of the task's training split);
to_litert also makes export/litert_mixed_int8.py's form. Each takes the family's
token-ids inputs: the WordPiece step stays in the reader, as in the graph it needs
TensorFlow ops that LiteRT's builtin ops lack (docs/deploying.md lists them;
ai-edge-litert's interpreter has no Select-TF-ops runtime)."""

import contextlib
import os
import re
from typing import Dict, List, Optional

import numpy as np
import tensorflow as tf

from export import folder as export_folder, outlier_groups, smoothing
from model.internals import litert_flatbuffer
from util import stderr

NAME = "litert"
READER = True
CALIBRATED = True  # full_int8 reads the job's calibration inputs
FORMS = ("float32", "dynamic_int8", "full_int8")
CALIBRATED_FORMS = ("full_int8", "mixed_int8")


def file_name(form: str) -> str:
  return f"model_{form}.tflite"


def refusal(job) -> str:
  return job.deployment_refusal("LiteRT") or (
      job.outlier_channels and job.writes(NAME, "full_int8")
      and outlier_groups.refusal(job.finetuned.model, job.outlier_channels)) or ""


def write(job, folder: str, log, forms=FORMS) -> List[str]:
  written = []
  for form in forms:
    name = file_name(form)
    path = os.path.join(folder, name)
    if form == "float32":
      model = job.litert_float32
    elif form not in CALIBRATED_FORMS:
      model = to_litert(job.function, job.finetuned.model.variables, form)
    else:
      model = _calibrated(job, form, name)
    export_folder.write_file(path, model)
    written.append(name)
    log(f"converted {name} ({os.path.getsize(path) / 2**20:.1f} MiB)"
        + (f", outliers migrated (alpha {job.smoothing_alpha})" if name in job.smoothed
           else "")
        + (f", {job.outlier_channels} outlier channels per block apart" if name in job.grouped
           else ""))
  return written


def _calibrated(job, form: str, name: str) -> bytes:
  """The job's model in a calibrated form (the file `name`, whose changes the job
  records): its dense layers' input outliers migrated into their weights first unless
  smoothing_alpha is None (export/smoothing.py), and in full int8 its outlier channels
  apart unless outlier_channels is 0 (export/outlier_groups.py)."""
  model = job.finetuned.model
  float_scope = job.head_scope if job.deployable.float_head else ""
  changes = (job.smoothing_alpha, job.outlier_channels if form == "full_int8" else 0)
  if job.smoothing_alpha is not None:
    job.smoothed[name] = job.smoothing_alpha
  if changes[1]:
    job.grouped[name] = changes[1]
  if changes == (None, 0):
    return to_litert(job.function, model.variables, form, job.calibration, float_scope,
                     job.litert_float32)
  with contextlib.ExitStack() as changed:
    if job.smoothing_alpha is not None:
      changed.enter_context(smoothing.migrated(
          model, model.encoder.transformer_layers, job.calibration, job.smoothing_alpha))
    if changes[1]:
      changed.enter_context(outlier_groups.grouped(model, job.calibration, changes[1]))
    # Traced anew inside: the job's function computes the model as it was. The changed
    # model's float32 flatbuffer names its nodes, once per change.
    function = job.model_function()
    if changes not in job.float32_references:
      job.float32_references[changes] = to_litert(function, model.variables, "float32")
    return to_litert(function, model.variables, form, job.calibration, float_scope,
                     job.float32_references[changes])


# Kept float32 in the full-int8 model (matched on the float model's tensor names); the
# figures: bench/RESULTS.md, "Why full int8 was no faster than float32, and the fix" and
# "Full int8's fidelity":
# - the attention mask's terms ((1 - mask) * -1e9), the masked scores and the softmax:
#   in int8 the -1e9 range makes every real score one value, and 1 - mask, given the
#   product's range, quantizes to 0, so padding goes unmasked;
# - the position embeddings' broadcast: in int8 its output takes other quantization
#   parameters than its input, whose bytes a broadcast copies unchanged;
# - the layer norms and the attention's two batched matmuls: XNNPACK takes none of their
#   int8 ops, so in int8 they run on LiteRT's scalar reference kernels and split the
#   delegated graph; in float32 XNNPACK takes them (tools.litert_ops lists them);
# - the migrated model's division of the dense layers' inputs (export/smoothing.py): in
#   int8 its input would take the outliers' range it is there to remove;
# - the join of a block's outlier channels and its others (export/outlier_groups.py),
#   before the LayerNorm, which is float32 already: in int8 one range again.
_FLOAT_NODES = re.compile(r"self_attention/softmax(_\d+)?/(sub|mul|add|Softmax)$"
                          r"|embeddings/position_embeddings/"
                          r"|layer_norm/"
                          r"|self_attention/einsum(_1)?/Einsum\d*$"
                          rf"|/{smoothing.SCOPE}/(mul|Maximum)$"
                          rf"|/{outlier_groups.SCOPE}/")
# Also kept float32 in mixed_int8: each layer's FFN (its two dense layers' weights int8:
# int8_outlier_dense_weights; the GELU between them) and the two residual sums, where a
# real pre-trained encoder's outlier dimensions are, which one int8 range would leave
# the other dimensions a step or two of (bench/RESULTS.md, "A real pre-trained encoder:
# int8 on MiniLM"; the GELU's input: "Every family and form, the peer beside").
_OUTLIER_NODES = re.compile(r"layer_\d+/(add(_1)?$|output/|intermediate/|activation(_\d+)?/)")


def to_litert(function, variables, form: str,
              calibration: Optional[Dict[str, np.ndarray]] = None,
              float_scope: str = "", reference: Optional[bytes] = None) -> bytes:
  """A LiteRT flatbuffer of `function` (its builtin ops only) in one of FORMS or
  mixed_int8; the calibrated forms calibrate on `calibration`'s rows and keep float32,
  besides _FLOAT_NODES (and mixed_int8's _OUTLIER_NODES), the ops under the name scope
  `float_scope` and the function's outputs (when given), named from `reference`, the
  function's float32 flatbuffer (converted here when not given)."""
  def converter():
    made = tf.lite.TFLiteConverter.from_concrete_functions(
        [function.get_concrete_function()], _Holder(variables))
    if form != "float32":
      made.optimizations = [tf.lite.Optimize.DEFAULT]
    return made
  try:
    with stderr.quiet_conversion():
      if form not in CALIBRATED_FORMS:
        return converter().convert()
      from ai_edge_litert.interpreter import Interpreter  # pylint: disable=import-outside-toplevel
      reference = Interpreter(
          model_content=reference or to_litert(function, variables, "float32"))
      kept = {t["name"] for t in reference.get_tensor_details()
              if _FLOAT_NODES.search(t["name"])
              or float_scope and f"/{float_scope}/" in t["name"]
              or form == "mixed_int8" and _OUTLIER_NODES.search(t["name"])}
      if float_scope:  # (the outputs' tensors are named after the call, not the scope)
        kept |= {t["name"] for t in reference.get_signature_runner().get_output_details()
                 .values()}
      names = sorted(kept)
      rows = len(next(iter(calibration.values())))
      samples = lambda: ({k: v[i:i + 1] for k, v in calibration.items()}
                         for i in range(rows))
      quantized = converter()
      quantized.representative_dataset = samples
      quantized.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
      # The debugger's converter is the converter's API for keeping named nodes float.
      model = tf.lite.experimental.QuantizationDebugger(
          converter=quantized, debug_dataset=samples,
          debug_options=tf.lite.experimental.QuantizationDebugOptions(
              denylisted_nodes=names)).get_nondebug_quantized_model()
      return int8_outlier_dense_weights(model) if form == "mixed_int8" else model
  except Exception as e:  # pylint: disable=broad-except  # the converter's own class
    ops = sorted({error.operator.name for error in getattr(e, "errors", [])
                  if error.operator.name})
    if not ops:
      raise
    raise ValueError(f"LiteRT ({form}) has no builtin kernel for "
                     f"{', '.join(ops)}") from None


def int8_outlier_dense_weights(model: bytes) -> bytes:
  """`model` with the weights of its float32 FFN output dense layers (_OUTLIER_NODES)
  made int8, symmetric per output channel, as the converter's dynamic-range form does:
  their outputs stay float32, where the outliers are, and LiteRT (XNNPACK's
  dynamically quantized kernel) quantizes each input row when it runs. The converter
  has no option for this on denylisted nodes, so the flatbuffer is edited: a smaller
  file at almost the same accuracy (bench/RESULTS.md, "A real pre-trained encoder: int8
  on MiniLM" and the section after it)."""
  schema, flatbuffer_utils = litert_flatbuffer()
  parsed = flatbuffer_utils.read_model_from_bytearray(model)
  graph = parsed.subgraphs[0]
  for op in graph.operators:
    code = parsed.operatorCodes[op.opcodeIndex]
    if (max(code.builtinCode, code.deprecatedBuiltinCode)
        != schema.BuiltinOperator.FULLY_CONNECTED
        or not _OUTLIER_NODES.search(graph.tensors[op.outputs[0]].name.decode())):
      continue
    weights = graph.tensors[op.inputs[1]]
    data = parsed.buffers[weights.buffer].data
    if weights.type != schema.TensorType.FLOAT32 or data is None:
      continue
    kernel = np.frombuffer(bytes(data), np.float32).reshape(weights.shape)
    scale = np.maximum(np.abs(kernel).max(axis=1), np.finfo(np.float32).tiny) / 127
    parsed.buffers[weights.buffer].data = np.frombuffer(
        np.round(kernel / scale[:, None]).astype(np.int8).tobytes(), np.uint8)
    weights.type = schema.TensorType.INT8
    weights.quantization = schema.QuantizationParametersT()
    weights.quantization.scale = scale.astype(np.float32).tolist()
    weights.quantization.zeroPoint = [0] * len(scale)
    weights.quantization.quantizedDimension = 0
    op.builtinOptions.asymmetricQuantizeInputs = True
  return bytes(flatbuffer_utils.convert_object_to_bytearray(parsed))


class _Holder(tf.Module):
  """Keeps the variables the converted function reads (the converter's trackable)."""

  def __init__(self, variables):
    super().__init__()
    self.held = list(variables)
