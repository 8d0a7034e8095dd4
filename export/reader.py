"""Runs an exported model (tools.export) without TensorFlow: shipped as reader.py
in the export folder, beside the project modules it needs (its family's reader module,
named in deploy.json, the tokenizer and featurization, copied as they are), so its ids
are the project's. Needs numpy and the model's runtime only: ai-edge-litert for .tflite,
onnxruntime for .onnx. With the export folder on sys.path:

  reader = Reader(folder)
  predict = load_model(os.path.join(folder, "model_full_int8.tflite"))
  records = reader.records(predict(reader.inputs(["a fine film"])))

inputs takes what the task takes: texts (and second texts of a pair task); sentences
to tag; questions and their contexts. records are what run_finetuning.py --predict
writes, for the inputs of the last inputs call (a QA model's serving SavedModel gives
the same windows' outputs, which records reads alike). A batch's inputs are as long as
its longest example; a model file whose token axis is fixed (QA's) gets them padded.
"""

import importlib
import json
import os
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from data_prep.normalization import from_fields
from data_prep.tokenizer import Tokenizer
from data_prep.vocab import load_vocab

INFO_FILE = "deploy.json"


class Reader:
  """Texts -> the model's int32 inputs; its outputs -> --predict's records."""

  def __init__(self, folder: str):
    with open(os.path.join(folder, INFO_FILE), encoding="utf-8") as f:
      self.info = json.load(f)
    tokenizer = Tokenizer(load_vocab(os.path.join(folder, "vocab.txt")),
                          *from_fields(self.info))
    self.family = importlib.import_module(self.info["reader"]).Reader(self.info, tokenizer)

  def inputs(self, *texts, **options) -> Dict[str, np.ndarray]:
    # A str where a list belongs would read as one input per character.
    for given in texts:
      if given is None:  # an optional argument not given (a single text's second)
        continue
      if isinstance(given, (str, bytes)):
        raise ValueError(f"inputs takes a list per argument, one item per input; got a "
                         f"{type(given).__name__}: put one text in a list")
      for index, item in enumerate(given):
        if item is None or isinstance(item, bytes):
          raise ValueError(f"input {index}: {item!r:.40}; expected a str" +
                           (" (decode it from UTF-8 first)" if item is not None else ""))
    return self.family.inputs(*texts, **options)

  def records(self, outputs: Dict[str, np.ndarray]) -> List[Dict[str, object]]:
    return self.family.records(outputs)


def load_model(path: str, threads: int = 1) -> Callable[[Dict[str, np.ndarray]],
                                                         Dict[str, np.ndarray]]:
  """inputs -> outputs of a .tflite (ai-edge-litert) or .onnx (onnxruntime) file, run
  at the inputs' length, or padded to the file's fixed token axis (input_length)."""
  run, shapes = _runtime(path, threads)
  length = _fixed_length(shapes)
  if length is None:
    return run
  # Zeros past the tokens are what the featurization pads with, masked by the model.
  return lambda inputs: run({name: np.pad(value, [(0, 0), (0, length - value.shape[1])])
                             for name, value in inputs.items()})


def input_length(path: str) -> Optional[int]:
  """The token axis of a model file's inputs, as the file declares it: its length when
  fixed, None when the file takes any length (the LiteRT interpreter is resized, the
  ONNX axis is symbolic)."""
  return _fixed_length(_runtime(path, 1)[1])


def _fixed_length(shapes: Sequence[Sequence]) -> Optional[int]:
  length = shapes[0][1]  # every input is [batch, tokens]
  return length if isinstance(length, int) and length > 0 else None


def _runtime(path: str, threads: int):
  """(inputs -> outputs, the inputs' declared shapes: -1, None or a name where any)."""
  if path.endswith(".tflite"):
    from ai_edge_litert.interpreter import Interpreter  # pylint: disable=import-outside-toplevel
    # The signature runner resizes the inputs to each call's shapes and reallocates
    # (on XNNPACK too) when they change.
    runner = Interpreter(model_path=path, num_threads=threads).get_signature_runner()
    shapes = [d["shape_signature"].tolist() for d in runner.get_input_details().values()]
    return lambda inputs: runner(**inputs), shapes
  if path.endswith(".onnx"):
    import onnxruntime  # pylint: disable=import-outside-toplevel
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    session = onnxruntime.InferenceSession(path, options,
                                           providers=["CPUExecutionProvider"])
    names = [output.name for output in session.get_outputs()]
    return (lambda inputs: dict(zip(names, session.run(names, inputs))),
            [i.shape for i in session.get_inputs()])
  raise ValueError(f"{path}: neither a .tflite nor an .onnx file")
