"""Tagging examples -> [CLS] pieces [SEP] model inputs, and the head's logits back to
tags. Each word is WordPiece-tokenized on its own; a word's label sits on its first
piece (word_positions); words past max_seq_length are left out of the model and tagged
O. numpy only: the exported models' reader (export/reader.py) ships this module.
"""

from typing import Dict, List, Sequence

import numpy as np

from data_prep.tokenizer import Tokenizer
from finetune.tagging import data as tagging_data

LABELS = tagging_data.BIOES_LABELS


def encode(tokenizer: Tokenizer, examples: Sequence[tagging_data.TaggingExample],
           length: int) -> Dict[str, np.ndarray]:
  """int32 input_ids, input_mask, segment_ids, word_positions, word_labels [N, length]
  and float32 word_label_mask (1 at each word that fits)."""
  vocab = tokenizer.vocab
  word_ids = {}
  for example in examples:
    for word in example.words:
      word_ids.setdefault(word, len(word_ids))
  ids, offsets = tokenizer.batch_ids(list(word_ids))
  pieces = [ids[offsets[i]:offsets[i + 1]] for i in range(len(word_ids))]
  label_id = {label: i for i, label in enumerate(LABELS)}
  n = len(examples)
  out = {name: np.zeros([n, length], np.int32) for name in (
      "input_ids", "input_mask", "segment_ids", "word_positions", "word_labels")}
  out["word_label_mask"] = np.zeros([n, length], np.float32)
  for i, example in enumerate(examples):
    tokens, positions = [vocab.cls_id], []
    for word in example.words:
      # A word BERT's cleaning empties (only control characters) still needs a slot.
      word_pieces = pieces[word_ids[word]] if len(pieces[word_ids[word]]) else [
          vocab.unk_id]
      if len(tokens) + len(word_pieces) + 1 > length:
        break
      positions.append(len(tokens))
      tokens.extend(word_pieces)
    tokens.append(vocab.sep_id)
    out["input_ids"][i, :len(tokens)] = tokens
    out["input_mask"][i, :len(tokens)] = 1
    # The original gives every piece of a tagging input segment id 1.
    out["segment_ids"][i, :len(tokens)] = 1
    out["word_positions"][i, :len(positions)] = positions
    out["word_labels"][i, :len(positions)] = [
        label_id[label] for label in tagging_data.to_bioes(example.tags)[:len(positions)]]
    out["word_label_mask"][i, :len(positions)] = 1.0
  return out


def predicted_tags(examples: Sequence[tagging_data.TaggingExample],
                   word_label_mask: np.ndarray, logits: np.ndarray) -> List[List[str]]:
  """Each sentence's predicted B-/I-/O tags (O for words cut off by max_seq_length)."""
  best = logits.argmax(-1)
  counts = word_label_mask.sum(-1).astype(int)
  return [tagging_data.to_bio([LABELS[k] for k in best[i, :counts[i]]] +
                              ["O"] * (len(example.words) - counts[i]))
          for i, example in enumerate(examples)]


def prediction_records(examples: Sequence[tagging_data.TaggingExample],
                       word_label_mask: np.ndarray, logits: np.ndarray):
  """--predict's record of each sentence: its index, words and tags."""
  return [{"index": e.eid, "words": list(e.words), "tags": tags}
          for e, tags in zip(examples, predicted_tags(examples, word_label_mask, logits))]
