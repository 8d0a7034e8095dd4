"""Runs an exported sentence model (tools.export_lite) without TensorFlow or the project.

Shipped as reader.py in the export folder, beside the project's tokenizer and
featurization modules (data_prep/, finetune/sentence/features.py, copied as they are),
so its ids are the project's. Needs numpy and the model's runtime only: ai-edge-litert
for .tflite, onnxruntime for .onnx. With the export folder on sys.path:

  reader = Reader(folder)
  predict = load_model(os.path.join(folder, "model_full_int8.tflite"))
  records = reader.records(predict(reader.inputs(["a fine film"])))

records are what run_finetuning.py --predict writes (index, label, probabilities; or
index, score).
"""

import collections
import json
import os
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from data_prep.tokenizer import Tokenizer
from data_prep.vocab import load_vocab
from finetune.sentence.features import encode

_Example = collections.namedtuple("_Example", "text_a text_b")


class Reader:
  """Texts -> the model's int32 inputs; its outputs -> --predict's records."""

  def __init__(self, folder: str):
    with open(os.path.join(folder, "deploy.json"), encoding="utf-8") as f:
      self.info = json.load(f)
    lower = self.info["lower_case"]
    self.tokenizer = Tokenizer(load_vocab(os.path.join(folder, "vocab.txt")), lower, lower)

  def inputs(self, texts_a: Sequence[str],
             texts_b: Optional[Sequence[str]] = None) -> Dict[str, np.ndarray]:
    if self.info["pair"] != (texts_b is not None):
      raise ValueError(f"{self.info['task']} takes " +
                       ("pairs of texts" if self.info["pair"] else "one text per input"))
    examples = [_Example(a, None if texts_b is None else texts_b[i])
                for i, a in enumerate(texts_a)]
    return encode(self.tokenizer, examples, self.info["max_seq_length"])

  def records(self, outputs: Dict[str, np.ndarray]) -> List[Dict[str, object]]:
    if self.info["regression"]:
      return [{"index": i, "score": float(s)} for i, s in enumerate(outputs["score"])]
    labels = self.info["labels"]
    return [{"index": i, "label": labels[int(k)],
             "probabilities": dict(zip(labels, map(float, p)))}
            for i, (k, p) in enumerate(zip(outputs["label_id"], outputs["probabilities"]))]


def load_model(path: str, threads: int = 1) -> Callable[[Dict[str, np.ndarray]],
                                                         Dict[str, np.ndarray]]:
  """inputs -> outputs of a .tflite (ai-edge-litert) or .onnx (onnxruntime) file."""
  if path.endswith(".tflite"):
    from ai_edge_litert.interpreter import Interpreter  # pylint: disable=import-outside-toplevel
    runner = Interpreter(model_path=path, num_threads=threads).get_signature_runner()
    return lambda inputs: runner(**inputs)
  if path.endswith(".onnx"):
    import onnxruntime  # pylint: disable=import-outside-toplevel
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    session = onnxruntime.InferenceSession(path, options,
                                           providers=["CPUExecutionProvider"])
    names = [output.name for output in session.get_outputs()]
    return lambda inputs: dict(zip(names, session.run(names, inputs)))
  raise ValueError(f"{path}: neither a .tflite nor an .onnx file")
