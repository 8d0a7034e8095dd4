"""Sequence tagging data: CoNLL-2000 chunking files, the chunk label encodings, and the
model's inputs.

Owns the chunking task definition, the reader for `word POS tag` lines with a blank line
between sentences (unknown tags and malformed lines are errors at file:line), the
conversion between the files' B-/I-/O tags and the B-/I-/E-/S-/O labels the original
trains on, and the features: each word is WordPiece-tokenized on its own and the
sentence becomes [CLS] pieces [SEP]; a word's label sits on its first piece
(word_positions); words past max_seq_length are left out of the model and tagged O.
The head's logits go back to tags here too. numpy only: the exported models' reader
(deployed.py) ships this module. Span-level F1 lives in metrics.py.
"""

import dataclasses
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from data_prep.tokenizer import Tokenizer
from finetune import layout
from finetune.errors import DataError, at
from finetune.tagging.metrics import chunk_spans

CHUNK_TYPES = ("ADJP", "ADVP", "CONJP", "INTJ", "LST", "NP", "PP", "PRT", "SBAR", "UCP",
               "VP")
CHUNK_TAGS = ("O",) + tuple(f"{p}-{t}" for t in CHUNK_TYPES for p in "BI")
# The original trains on BIOES: a chunk's last word E-, a one-word chunk S-.
BIOES_LABELS = ("O",) + tuple(f"{p}-{t}" for t in CHUNK_TYPES for p in "BIES")


@dataclasses.dataclass(frozen=True)
class TaggingTask:
  name: str
  folders: Tuple[str, ...]
  tags: Tuple[str, ...]
  aliases: Tuple[str, ...] = ()
  eval_splits: Tuple[str, ...] = ("dev",)
  test_splits: Tuple[str, ...] = ("test",)
  train_split: str = "train"
  metrics: Tuple[str, ...] = ("f1",)


# CoNLL-2000 has no dev set: the original reports the test set, so it is scored each epoch.
CHUNKING = TaggingTask("chunk", folders=("chunk", "conll2000"), tags=CHUNK_TAGS,
                       eval_splits=("test",), test_splits=())


# A sentence of more words is refused as a file without its blank lines (one was read as
# a 5,000-word sentence): a model reads at most 512 positions, a word at least one, so
# words past those are never tagged; CoNLL-2000's longest sentence has 78.
MAX_SENTENCE_WORDS = 1000


@dataclasses.dataclass(frozen=True)
class TaggingExample:
  eid: int
  words: Tuple[str, ...]
  pos: Tuple[str, ...]
  tags: Tuple[str, ...]


def read_conll(path: str, tags: Sequence[str] = CHUNK_TAGS) -> List[TaggingExample]:
  """Sentences of a CoNLL-2000 file: `word POS tag` per line, blank line between."""
  known = frozenset(tags)
  examples, sentence = [], []
  first_line = 0  # of the sentence being read

  def finish():
    if sentence:
      words, pos, sentence_tags = zip(*sentence)
      examples.append(TaggingExample(len(examples), words, pos, sentence_tags))
      sentence.clear()

  try:
    with open(path, encoding="utf-8") as f:
      for line_number, line in enumerate(f, start=1):
        fields = line.split()
        if not fields:
          finish()
          continue
        if len(fields) != 3:
          raise at(path, line_number, f"expected 'word POS chunk-tag', found "
                                      f"{len(fields)} fields")
        if fields[2] not in known:
          raise at(path, line_number, f"unknown chunk tag {fields[2]!r}; expected O or "
                                      f"B-/I- with one of {', '.join(CHUNK_TYPES)}")
        if not sentence:
          first_line = line_number
        elif len(sentence) == MAX_SENTENCE_WORDS:
          raise at(path, first_line, f"a sentence of more than {MAX_SENTENCE_WORDS:,} "
                                     "words starts here; sentences are separated by "
                                     "blank lines")
        sentence.append(tuple(fields))
  except UnicodeDecodeError as e:
    raise DataError(f"{path}: not UTF-8 text (byte {e.start})") from None
  finish()
  if not examples:
    raise DataError(f"{path}: no sentences")
  return examples


def read_sentences(path: str) -> Iterator[TaggingExample]:
  """Sentences to tag, one a line (words split at whitespace; blank lines skipped, each
  sentence numbered by its line from 0), read as they come. Their tags are placeholders
  (all O)."""
  try:
    with open(path, encoding="utf-8") as f:
      for eid, line in enumerate(f):
        words = tuple(line.split())
        if words:
          yield TaggingExample(eid, words, ("",) * len(words), ("O",) * len(words))
  except UnicodeDecodeError as e:
    raise DataError(f"{path}: not UTF-8 text (byte {e.start})") from None


def split_file(task: TaggingTask, data_dir: str, split: str) -> str:
  return layout.find_split_file(data_dir, task.name, split, task.folders,
                                [split + ".txt"], "CoNLL-2000 format")


def read_examples(task: TaggingTask, data_dir: str, split: str,
                  max_examples: Optional[int] = None, tfds_data_dir: Optional[str] = None,
                  fetch_missing: bool = False) -> List[TaggingExample]:
  """The first `max_examples` sentences (all when None) of a split's CoNLL file (TFDS
  has no chunking task: its arguments are the family reader's, unused)."""
  del tfds_data_dir, fetch_missing
  return read_conll(split_file(task, data_dir, split), task.tags)[:max_examples]


def to_bioes(tags: Sequence[str]) -> List[str]:
  """B-/I-/O tags to B-/I-/E-/S-/O labels, chunk by chunk as conlleval reads them."""
  labels = ["O"] * len(tags)
  for chunk_type, first, last in chunk_spans(tags):
    if first == last:
      labels[first] = "S-" + chunk_type
    else:
      labels[first], labels[last] = "B-" + chunk_type, "E-" + chunk_type
      labels[first + 1:last] = ["I-" + chunk_type] * (last - first - 1)
  return labels


def to_bio(labels: Sequence[str]) -> List[str]:
  """B-/I-/E-/S-/O labels (e.g. predictions) back to B-/I-/O tags."""
  renamed = {"S": "B", "E": "I"}
  return [label if label == "O" else renamed.get(label[0], label[0]) + label[1:]
          for label in labels]


def encode(tokenizer: Tokenizer, examples: Sequence[TaggingExample],
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
  label_id = {label: i for i, label in enumerate(BIOES_LABELS)}
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
        label_id[label] for label in to_bioes(example.tags)[:len(positions)]]
    out["word_label_mask"][i, :len(positions)] = 1.0
  return out


def predicted_tags(examples: Sequence[TaggingExample],
                   word_label_mask: np.ndarray, logits: np.ndarray) -> List[List[str]]:
  """Each sentence's predicted B-/I-/O tags (O for words cut off by max_seq_length)."""
  best = logits.argmax(-1)
  counts = word_label_mask.sum(-1).astype(int)
  return [to_bio([BIOES_LABELS[k] for k in best[i, :counts[i]]] +
                              ["O"] * (len(example.words) - counts[i]))
          for i, example in enumerate(examples)]


def prediction_records(examples: Sequence[TaggingExample],
                       word_label_mask: np.ndarray, logits: np.ndarray):
  """--predict's record of each sentence: its index, words and tags."""
  return [{"index": e.eid, "words": list(e.words), "tags": tags}
          for e, tags in zip(examples, predicted_tags(examples, word_label_mask, logits))]
