"""A tagging task's exported model as the reader (export/reader.py) sees it: sentences
(words split at whitespace, or lists of words) to its input_ids, input_mask,
segment_ids, word_positions (as long as the batch's longest sentence); its logits
[B, L, labels] to --predict's records (index, words, one B-/I-/O tag per word). numpy
only: shipped with the export."""

from typing import Dict, List, Sequence, Union

import numpy as np

from finetune.padding import cut_to_longest
from finetune.tagging.data import TaggingExample, encode, prediction_records

INPUTS = ("input_ids", "input_mask", "segment_ids", "word_positions")


class Reader:
  """inputs(sentences) -> the model's inputs; records(outputs) -> the records of the
  sentences of the last inputs call."""

  def __init__(self, info: Dict[str, object], tokenizer):
    self.info, self.tokenizer = info, tokenizer
    self._last = None

  def inputs(self, sentences: Sequence[Union[str, Sequence[str]]]) -> Dict[str, np.ndarray]:
    examples = []
    for index, sentence in enumerate(sentences):
      words = tuple(sentence.split() if isinstance(sentence, str) else sentence)
      examples.append(TaggingExample(index, words, ("",) * len(words), ("O",) * len(words)))
    features = cut_to_longest(encode(self.tokenizer, examples, self.info["max_seq_length"]))
    self._last = examples, features["word_label_mask"]
    return {name: features[name] for name in INPUTS}

  def records(self, outputs: Dict[str, np.ndarray]) -> List[Dict[str, object]]:
    if self._last is None:
      raise ValueError("records(outputs) reads the outputs of inputs(sentences): call "
                       "inputs first")
    examples, mask = self._last
    return prediction_records(examples, mask, outputs["logits"])
