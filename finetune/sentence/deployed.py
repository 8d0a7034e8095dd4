"""A sentence task's exported model as the reader (export/reader.py) sees it: texts to
its input_ids, input_mask, segment_ids (as long as the batch's longest text); its
probabilities and label_id (or score) to --predict's records. numpy only: shipped with
the export."""

import itertools
from typing import Dict, List, Optional, Sequence

import numpy as np

from finetune.padding import cut_to_longest
from finetune.sentence.data import SentenceExample, encode


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
    examples = [SentenceExample(i, a, None if texts_b is None else texts_b[i], None)
                for i, a in enumerate(texts_a)]
    return cut_to_longest(encode(self.tokenizer, examples, self.info["max_seq_length"]))

  def records(self, outputs: Dict[str, np.ndarray]) -> List[Dict[str, object]]:
    return prediction_records(self.info["labels"], itertools.count(), outputs)


def prediction_records(labels: Sequence[str], indexes: Sequence[int],
                       outputs: Dict[str, np.ndarray]) -> List[Dict[str, object]]:
  """--predict's record of each text from the model's numeric outputs (serving.py's
  numeric_outputs): index, label and probabilities, or a regression's index and score."""
  if "score" in outputs:
    return [{"index": i, "score": float(s)} for i, s in zip(indexes, outputs["score"])]
  return [{"index": i, "label": labels[int(k)],
           "probabilities": dict(zip(labels, map(float, p)))}
          for i, k, p in zip(indexes, outputs["label_id"], outputs["probabilities"])]
