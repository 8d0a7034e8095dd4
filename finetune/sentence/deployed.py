"""A sentence task's exported model as the reader (export/reader.py) sees it: texts to
its input_ids, input_mask, segment_ids (as long as the batch's longest text); its
probabilities and label_id (or score) to --predict's records. numpy only: shipped with
the export."""

import collections
from typing import Dict, List, Optional, Sequence

import numpy as np

from finetune.padding import cut_to_longest
from finetune.sentence.features import encode

_Example = collections.namedtuple("_Example", "text_a text_b")


class Reader:
  """inputs(texts_a[, texts_b]) -> the model's inputs; records(outputs) -> one record
  per text: index, label and probabilities (or index and score)."""

  def __init__(self, info: Dict[str, object], tokenizer):
    self.info, self.tokenizer = info, tokenizer

  def inputs(self, texts_a: Sequence[str],
             texts_b: Optional[Sequence[str]] = None) -> Dict[str, np.ndarray]:
    if self.info["pair"] != (texts_b is not None):
      raise ValueError(f"{self.info['task']} takes " +
                       ("pairs of texts" if self.info["pair"] else "one text per input"))
    examples = [_Example(a, None if texts_b is None else texts_b[i])
                for i, a in enumerate(texts_a)]
    return cut_to_longest(encode(self.tokenizer, examples, self.info["max_seq_length"]))

  def records(self, outputs: Dict[str, np.ndarray]) -> List[Dict[str, object]]:
    if self.info["regression"]:
      return [{"index": i, "score": float(s)} for i, s in enumerate(outputs["score"])]
    labels = self.info["labels"]
    return [{"index": i, "label": labels[int(k)],
             "probabilities": dict(zip(labels, map(float, p)))}
            for i, (k, p) in enumerate(zip(outputs["label_id"], outputs["probabilities"]))]
