"""LiteRT flatbuffers for ai-edge-litert: model_float32.tflite, model_dynamic_int8.tflite
(int8 weights, float activations) and model_full_int8.tflite (int8 weights and
activations, their ranges calibrated on a seeded sample of the task's training split);
to_litert also makes the calibrated int16-activation form of export/litert_int16x8.py.
Each takes the family's token-ids inputs (export/families.py); the WordPiece step stays
in the reader: in the graph it needs TensorFlow ops that LiteRT's builtin ops lack
(docs/deploying.md lists them; ai-edge-litert's interpreter has no Select-TF-ops
runtime to run them)."""

import os
import re
from typing import Dict, List, Optional

import numpy as np
import tensorflow as tf
from tensorflow.compiler.mlir.lite import types_pb2
from tensorflow.lite.python import convert as tf_convert

from export import folder as export_folder

NAME = "litert"
READER = True
CALIBRATED = True  # full_int8 reads the job's calibration inputs
FORMS = ("float32", "dynamic_int8", "full_int8")
# Activations calibrated: int8 ones, or int16 ones (int8 weights) that hold the
# activation outliers of real pre-trained encoders (docs/deploying.md).
CALIBRATED_FORMS = ("full_int8", "int16x8")


def file_name(form: str) -> str:
  return f"model_{form}.tflite"


class UnsupportedOpError(ValueError):
  """The model holds ops that the target runtime cannot run."""


def refusal(job) -> str:
  return job.deployment_refusal("LiteRT")


def write(job, folder: str, log, forms=FORMS) -> List[str]:
  written = []
  for form in forms:
    name = file_name(form)
    path = os.path.join(folder, name)
    export_folder.write_file(path, to_litert(
        job.function, job.finetuned.model.variables, form,
        job.calibration if form in CALIBRATED_FORMS else None,
        job.head_scope if job.deployable.float_head else ""))
    written.append(name)
    log(f"converted {name} ({os.path.getsize(path) / 2**20:.1f} MiB)")
  return written


# Kept float32 in the full-int8 model (matched on the float model's tensor names):
# - the attention mask (0/1) and the query's scaling, which feeds the float batched
#   matmul anyway: int16x8's quantizer failed on their constants (made int8 beside
#   int16 activations);
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
                          r"|/attention_mask/|self_attention/Mul$"
                          r"|embeddings/position_embeddings/"
                          r"|layer_norm/"
                          r"|self_attention/einsum(_1)?/Einsum\d*$")


def to_litert(function, variables, form: str,
              calibration: Optional[Dict[str, np.ndarray]] = None,
              float_scope: str = "") -> bytes:
  """A LiteRT flatbuffer of `function` (its builtin ops only) in one of FORMS or
  int16x8; the calibrated forms calibrate on `calibration`'s rows and keep float32,
  besides _FLOAT_NODES, the ops under the name scope `float_scope` and the function's
  outputs (when given)."""
  def converter():
    made = tf.lite.TFLiteConverter.from_concrete_functions(
        [function.get_concrete_function()], _Holder(variables))
    if form != "float32":
      made.optimizations = [tf.lite.Optimize.DEFAULT]
    return made
  try:
    if form not in CALIBRATED_FORMS:
      return converter().convert()
    from ai_edge_litert.interpreter import Interpreter  # pylint: disable=import-outside-toplevel
    reference = Interpreter(model_content=to_litert(function, variables, "float32"))
    kept = {t["name"] for t in reference.get_tensor_details()
            if _FLOAT_NODES.search(t["name"]) or float_scope and f"/{float_scope}/" in t["name"]}
    if float_scope:  # (the outputs' tensors are named after the call, not the scope)
      kept |= {t["name"] for t in reference.get_signature_runner().get_output_details()
               .values()}
    names = sorted(kept)
    rows = len(next(iter(calibration.values())))
    samples = lambda: ({k: v[i:i + 1] for k, v in calibration.items()} for i in range(rows))
    quantized = converter()
    quantized.representative_dataset = samples
    quantized.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    # The debugger's converter is the converter's API for keeping named nodes float.
    debugger = tf.lite.experimental.QuantizationDebugger(
        converter=quantized, debug_dataset=samples,
        debug_options=tf.lite.experimental.QuantizationDebugOptions(
            denylisted_nodes=names))
    if form == "full_int8":
      return debugger.get_nondebug_quantized_model()
    # int16x8: the debugger quantizes to int8 only, and the converter's own 16x8 mode
    # keeps no named node float (the mask's -1e9 then swallows every real score, as in
    # int8), so its calibrated model goes through the quantizer the converter calls.
    return tf_convert.mlir_quantize(debugger.calibrated_model,
                                    inference_type=types_pb2.QUANTIZED_INT16,
                                    denylisted_nodes=names)
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
