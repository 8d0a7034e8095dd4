"""Sentence and sentence-pair examples -> [CLS] A [SEP] (B [SEP]) model inputs.

Truncation is the original's: the longer text loses its last token until the pair fits
max_seq_length - 3 (B when they tie); a single text keeps max_seq_length - 2 tokens.
"""

from typing import Dict, Sequence

import numpy as np

from data_prep.tokenizer import Tokenizer


def _token_ids(tokenizer: Tokenizer, texts: Sequence[str]):
  # Lines are tokenized as a batch; a newline inside a text is whitespace to BERT.
  ids, offsets = tokenizer.batch_ids([t.replace("\n", " ") for t in texts])
  return [ids[offsets[i]:offsets[i + 1]] for i in range(len(texts))]


def truncate_pair(a: list, b: list, max_tokens: int):
  while len(a) + len(b) > max_tokens:
    (a if len(a) > len(b) else b).pop()


def encode(tokenizer: Tokenizer, examples, max_seq_length: int) -> Dict[str, np.ndarray]:
  """int32 input_ids, input_mask, segment_ids [N, max_seq_length] for the examples."""
  vocab = tokenizer.vocab.ids
  cls_id, sep_id = vocab["[CLS]"], vocab["[SEP]"]
  texts_a = _token_ids(tokenizer, [e.text_a for e in examples])
  paired = [i for i, e in enumerate(examples) if e.text_b is not None]
  texts_b = dict(zip(paired, _token_ids(tokenizer, [examples[i].text_b for i in paired])))
  n = len(examples)
  out = {name: np.zeros([n, max_seq_length], np.int32)
         for name in ("input_ids", "input_mask", "segment_ids")}
  for i in range(n):
    a = list(texts_a[i])
    b = list(texts_b[i]) if i in texts_b else None
    if b is None:
      a = a[:max_seq_length - 2]
      ids, segments = [cls_id] + a + [sep_id], [0] * (len(a) + 2)
    else:
      truncate_pair(a, b, max_seq_length - 3)
      ids = [cls_id] + a + [sep_id] + b + [sep_id]
      segments = [0] * (len(a) + 2) + [1] * (len(b) + 1)
    out["input_ids"][i, :len(ids)] = ids
    out["input_mask"][i, :len(ids)] = 1
    out["segment_ids"][i, :len(ids)] = segments
  return out
