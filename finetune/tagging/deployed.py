"""A tagging task's exported model as the reader (export/reader.py) sees it: sentences
(text, its words split at whitespace, or lists of words) to the input_ids, input_mask,
segment_ids, word_positions of their windows (a long sentence gives several rows; as
long as the batch's longest); its logits [N, L, labels] to --predict's records (index,
words, a tag per word, each from its window of most context, and an entity task's
entities). numpy only: shipped with the export."""

from typing import Dict, List, Sequence, Union

import numpy as np

from finetune.padding import cut_to_longest
from finetune.tagging.data import TaggingExample, prediction_records, split_line, windows

INPUTS = ("input_ids", "input_mask", "segment_ids", "word_positions")


class Reader:
  """inputs(sentences) -> the model's inputs; records(outputs) -> the records of the
  sentences of the last inputs call."""

  def __init__(self, info: Dict[str, object], tokenizer):
    self.info, self.tokenizer = info, tokenizer
    self._last = None

  def inputs(self, sentences: Sequence[Union[str, Sequence[str]]]) -> Dict[str, np.ndarray]:
    examples = [split_line(index, sentence) if isinstance(sentence, str) else
                TaggingExample(index, tuple(sentence))
                for index, sentence in enumerate(sentences)]
    features = windows(self.tokenizer, examples, self.info["max_seq_length"],
                       self.info["tagging_stride"])
    self._last = examples, features
    return cut_to_longest({name: features[name] for name in INPUTS})

  def records(self, outputs: Dict[str, np.ndarray]) -> List[Dict[str, object]]:
    if self._last is None:
      raise ValueError("records(outputs) reads the outputs of inputs(sentences): call "
                       "inputs first")
    examples, features = self._last
    return prediction_records(examples, features, outputs["logits"],
                              self.info["output_tags"], self.info["entities"])
