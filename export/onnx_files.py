"""ONNX files for onnxruntime: model_float32.onnx (tf2onnx) and model_dynamic_int8.onnx
(onnxruntime's dynamic quantization of it). Each takes the family's token-ids inputs
(its serving.py), read by the reader bundle."""

import os
import tempfile
from typing import List

import numpy as np

from util import stderr

NAME = "onnx"
READER = True
FORMS = ("float32", "dynamic_int8")
ONNX_OPSET = 17


def file_name(form: str) -> str:
  return f"model_{form}.onnx"


def refusal(job) -> str:
  return job.deployment_refusal("ONNX")


def write(job, folder: str, log, forms=FORMS) -> List[str]:
  float_path = os.path.join(folder, file_name("float32"))
  to_onnx(job.function, float_path)
  if "dynamic_int8" in forms:
    quantize_onnx(float_path, os.path.join(folder, file_name("dynamic_int8")))
  if "float32" not in forms:  # only the int8 file's source
    os.remove(float_path)
  written = [file_name(form) for form in FORMS if form in forms]
  for name in written:
    log(f"converted {name} ({os.path.getsize(os.path.join(folder, name)) / 2**20:.1f} MiB)")
  return written


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
  with stderr.quiet_conversion():
    proto, _ = tf2onnx.convert.from_function(
        function, input_signature=function.input_signature, opset=ONNX_OPSET,
        custom_op_handlers={"Erfc": (erfc, [])})
  # tf2onnx leaves an op it cannot map in the graph, saying so only in its log.
  unknown = sorted({n.op_type for n in proto.graph.node
                    if not onnx.defs.has(n.op_type, n.domain)})
  if unknown:
    raise ValueError(f"ONNX has no operator for {', '.join(unknown)}")
  onnx.save(proto, path)


def quantize_onnx(source: str, path: str):
  """onnxruntime's dynamic quantization of the float ONNX file `source`: int8 weights,
  activations quantized at run time, every weight matrix (bench/RESULTS.md, "ONNX int8:
  every weight matrix quantized")."""
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
  # 7-bit weights (reduce_range): on a CPU without VNNI (AVX2 only), onnxruntime's
  # uint8 x int8 product sums pairs into int16, which 8-bit weights overflow. A scale
  # per output column (per_channel) buys the lost bit back, at about the time of 8-bit
  # weights (bench/RESULTS.md, "An AVX2 CPU").
  quantize_dynamic(proto, path, weight_type=QuantType.QInt8, reduce_range=True,
                   per_channel=True)


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
