"""Sequence tagging data: the tasks (CoNLL-2000 chunking, CoNLL-2003 and CoNLL-2002 named
entities, XTREME's part of speech, and users' own from their task files), their files
(CoNLL columns, CoNLL-U or JSON lines: docs/finetuning.md, "A tagging task of your own")
or else TFDS, the tag schemes, and the model's inputs.

An entity task trains, as the original does, on the BIOES labels of its entities (a
last word E-, a one-word entity S-); its predictions go back to IOB2 tags (BIOES for a
BIOES task). Each word is WordPiece-tokenized on its own, its label on its first piece
(word_positions). A sentence longer than max_seq_length - 2 pieces is read in windows
starting every tagging_stride pieces, as QA reads a context (finetune/windows.py): each
trains on the words whose first piece it holds, and each word is predicted from the
window where that piece has the most context. numpy only: the exported models' reader
(deployed.py) ships this module.
"""

import dataclasses
import logging
import re
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from data_prep.tokenizer import Tokenizer
from finetune import layout, tfds_source
from finetune.errors import DataError, at, json_lines
from finetune.windows import WordPieces, doc_spans, max_context_owner
from finetune.tagging.metrics import entity_spans

# The tag schemes, by the names a task file gives them.
SCHEMES = ("iob1", "iob2", "bioes", "none")
SCHEME_NAMES = {"bio": "iob2", "iobes": "bioes", **{s: s for s in SCHEMES}}
PREFIXES = {"iob1": "BI", "iob2": "BI", "bioes": "BIES"}
FORMATS = ("conll", "conllu", "jsonl")


@dataclasses.dataclass(frozen=True)
class TaggingTask:
  """A tagging task: its tags, their scheme, its files' splits and layout."""
  name: str
  tags: Tuple[str, ...]  # every tag its files may hold, in its scheme
  # Each split's accepted file names in its folder ({} for a user's task: its `files`).
  splits: Dict[str, Tuple[str, ...]]
  scheme: str = "iob2"
  folders: Tuple[str, ...] = ()  # accepted folder names under finetuning_data/
  aliases: Tuple[str, ...] = ()
  eval_splits: Tuple[str, ...] = ("dev",)
  test_splits: Tuple[str, ...] = ("test",)
  train_split: str = "train"
  metrics: Tuple[str, ...] = ("f1",)
  file_format: str = "conll"
  word_column: int = 0
  tag_column: int = -1  # Python's index: -1 the last
  # A user's task (its task file, family.py): the path of each split's file.
  files: Dict[str, str] = dataclasses.field(default_factory=dict)
  tfds_name: Optional[str] = None
  tfds_tags: str = "ner"  # the TFDS feature holding the tags (class ids)

  @property
  def types(self) -> Tuple[str, ...]:
    """The entity types, in the order of the tags ("none": none)."""
    if self.scheme == "none":
      return ()
    return tuple(dict.fromkeys(t[2:] for t in self.tags if t != "O"))

  @property
  def labels(self) -> Tuple[str, ...]:
    """What the head predicts: an entity task's BIOES labels, else the tags."""
    if self.scheme == "none":
      return self.tags
    return ("O",) + tuple(f"{p}-{t}" for t in self.types for p in "BIES")

  @property
  def output_tags(self) -> Tuple[str, ...]:
    """The tag --predict writes for each label: IOB2 for IOB tasks."""
    return tuple(to_bio(self.labels)) if self.scheme in ("iob1", "iob2") else self.labels

  def tags_described(self) -> str:
    """The tags, as an error names what was expected."""
    if self.scheme == "none":
      return ", ".join(self.tags)
    return f"O or {'/'.join(p + '-' for p in PREFIXES[self.scheme])} with one of " \
        f"{', '.join(self.types)}"


CHUNK_TYPES = ("ADJP", "ADVP", "CONJP", "INTJ", "LST", "NP", "PP", "PRT", "SBAR", "UCP",
               "VP")
CHUNK_TAGS = ("O",) + tuple(f"{p}-{t}" for t in CHUNK_TYPES for p in "BI")
NER_TAGS = ("O",) + tuple(f"{p}-{t}" for t in ("LOC", "MISC", "ORG", "PER") for p in "BI")
# Universal Dependencies' parts of speech.
UPOS = ("ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON",
        "PROPN", "PUNCT", "SCONJ", "SYM", "VERB", "X")
# XTREME's languages with training and dev data (TFDS xtreme_pos configs).
XTREME_POS_LANGUAGES = ("af", "ar", "bg", "de", "el", "en", "es", "et", "eu", "fa", "fi",
                        "fr", "he", "hi", "hu", "id", "it", "ja", "ko", "mr", "nl", "pt",
                        "ru", "te", "tl", "tr", "ur", "vi", "zh")

# CoNLL-2000 has no dev set: the original reports the test set, so it is scored each
# epoch. Its files: word, part of speech, chunk tag.
CHUNKING = TaggingTask("chunk", CHUNK_TAGS,
                       {"train": ("train.txt",), "test": ("test.txt",)},
                       folders=("chunk", "conll2000"), eval_splits=("test",),
                       test_splits=(), tag_column=2)


def _conll_ner(name, folder, prefix, scheme) -> TaggingTask:
  """A CoNLL named-entity task: its files as the shared task shipped them (<prefix>.train,
  .testa, .testb) or named by split."""
  return TaggingTask(name, NER_TAGS, {
      "train": ("train.txt", f"{prefix}.train"), "dev": ("dev.txt", f"{prefix}.testa"),
      "test": ("test.txt", f"{prefix}.testb")}, scheme=scheme, folders=(folder,),
                     tfds_name=name)


TAGGING_TASKS = (
    CHUNKING,
    # English (word, POS, chunk, entity), its entities in IOB1 as shipped.
    _conll_ner("conll2003", "conll2003", "eng", "iob1"),
    # Spanish (word, entity) and Dutch (word, POS, entity), in IOB2.
    _conll_ner("conll2002/es", "conll2002_es", "esp", "iob2"),
    _conll_ner("conll2002/nl", "conll2002_nl", "ned", "iob2"),
    *(TaggingTask(f"xtreme_pos/xtreme_pos_{lang}", UPOS, {
        split: (f"{split}.conllu",) for split in ("train", "dev", "test")},
                  scheme="none", folders=(f"xtreme_pos_{lang}",),
                  aliases=(f"xtreme_pos/{lang}",), metrics=("accuracy",),
                  file_format="conllu", word_column=1, tag_column=3,
                  tfds_name=f"xtreme_pos/xtreme_pos_{lang}", tfds_tags="upos")
      for lang in XTREME_POS_LANGUAGES),
)


# A sentence of more words is refused as a file without its blank lines (one was read as
# a 5,000-word sentence); CoNLL-2000's longest sentence has 78.
MAX_SENTENCE_WORDS = 1000


@dataclasses.dataclass(frozen=True)
class TaggingExample:
  eid: int
  words: Tuple[str, ...]
  tags: Tuple[str, ...] = ()  # () when unlabeled (--predict)
  # A text line the words were split from at whitespace, and each word's first
  # character in it (--predict's entities are spans of the line).
  line: Optional[str] = None
  starts: Tuple[int, ...] = ()


def _open(path: str):
  try:
    return open(path, encoding="utf-8")
  except OSError as e:
    raise DataError(f"{path}: cannot read it ({e.strerror})") from None


def _conll_sentences(path: str, file_format: str, word_column: int, tag_column: int
                     ) -> Iterator[Tuple[List[int], List[str], List[str]]]:
  """Each sentence of a CoNLL or CoNLL-U file: its words' line numbers, words, tags."""
  lines, words, tags = [], [], []
  with _open(path) as f:
    for number, line in enumerate(f, start=1):
      fields = line.split()
      if file_format == "conllu" and fields and not fields[0].isdigit():
        continue  # a comment, a multiword token (1-2) or an empty node (1.1)
      if not fields or fields[0] == "-DOCSTART-":
        if words:
          yield lines, words, tags
          lines, words, tags = [], [], []
        continue
      n = len(fields)
      if not (-n <= word_column < n and -n <= tag_column < n) or (
          word_column % n == tag_column % n):
        raise at(path, number, f"expected a word in column {word_column} and a tag in "
                               f"column {tag_column} (0-based, -1 the last), found {n} "
                               f"column{'s' * (n != 1)}")
      if len(words) == MAX_SENTENCE_WORDS:
        raise at(path, lines[0], f"a sentence of more than {MAX_SENTENCE_WORDS:,} words "
                                 "starts here; sentences are separated by blank lines")
      lines.append(number)
      words.append(fields[word_column])
      tags.append(fields[tag_column])
  if words:
    yield lines, words, tags


def _json_sentences(path: str) -> Iterator[Tuple[List[int], List[str], List[str]]]:
  """Each sentence of a JSON-lines file of {"words": [...], "tags": [...]}."""
  for number, record in json_lines(path):
    if not (isinstance(record, dict) and all(
        isinstance(record.get(k), list) and all(isinstance(x, str) for x in record[k])
        for k in ("words", "tags"))):
      raise at(path, number, 'expected a JSON object with "words" and "tags", lists of '
                             "strings")
    words, tags = record["words"], record["tags"]
    if not words:
      raise at(path, number, "an empty sentence (no words)")
    if len(words) != len(tags):
      raise at(path, number, f"{len(words)} words but {len(tags)} tags")
    yield [number] * len(words), words, tags


def _sentences(path: str, file_format: str, word_column: int, tag_column: int):
  """Each sentence (line numbers, words, tags) of a file of any FORMATS; none: an error."""
  try:
    read = (_json_sentences(path) if file_format == "jsonl" else
            _conll_sentences(path, file_format, word_column, tag_column))
    found = False
    for sentence in read:
      found = True
      yield sentence
  except UnicodeDecodeError as e:
    raise DataError(f"{path}: not UTF-8 text (byte {e.start})") from None
  if not found:
    raise DataError(f"{path}: no sentences")


def read_file(task: TaggingTask, path: str, split: str = "") -> List[TaggingExample]:
  """Every sentence of one of a task's files, each tag one of the task's."""
  del split  # a test file is labelled
  known = frozenset(task.tags)
  examples = []
  for lines, words, tags in _sentences(path, task.file_format, task.word_column,
                                       task.tag_column):
    for line, tag in zip(lines, tags):
      if tag not in known:
        raise at(path, line, f"unknown tag {tag!r} of task {task.name}; expected "
                             f"{task.tags_described()}")
    examples.append(TaggingExample(len(examples), tuple(words), tuple(tags)))
  return examples


def scan_tags(path: str, file_format: str, word_column: int, tag_column: int
              ) -> Tuple[Dict[str, int], int, int]:
  """A training file's tags, each with the first line it is on, and how many of its
  entities (as conlleval reads B-/I- tags) open with I- and with B-; the entity counts
  are 0 for tags without those prefixes."""
  first_line, inside, begin = {}, 0, 0
  for lines, _, tags in _sentences(path, file_format, word_column, tag_column):
    for line, tag in zip(lines, tags):
      first_line.setdefault(tag, line)
    if all(t == "O" or t[:2] in ("B-", "I-") for t in tags):
      opening = [tags[first][0] for _, first, _ in entity_spans(tags)]
      inside, begin = inside + opening.count("I"), begin + opening.count("B")
  return first_line, inside, begin


def split_file(task: TaggingTask, data_dir: str, split: str) -> str:
  if split not in (task.files or task.splits):
    raise DataError(f"task {task.name} has no split {split!r} (it has "
                    f"{', '.join(task.files or task.splits)})")
  if task.files:
    return layout.own_file(task.files, split, task.name)
  return layout.find_split_file(data_dir, task.name, split, task.folders,
                                task.splits[split],
                                f"{task.file_format.replace('conll', 'CoNLL')} format")


def read_tfds(task: TaggingTask, split: str, builder) -> List[TaggingExample]:
  """The sentences of a TFDS dataset: its "tokens" and its tags' class ids."""
  names = builder.info.features[task.tfds_tags].feature.names
  known = frozenset(task.tags)
  source = f"TFDS {task.tfds_name} {split}"
  examples = []
  for index, record in enumerate(tfds_source.records(builder, split)):
    words = tuple(w.decode("utf-8") for w in record["tokens"])
    tags = tuple(names[k] for k in record[task.tfds_tags])
    where = f"{source} record {index}"
    if not words or len(words) != len(tags):
      raise DataError(f"{where}: {len(words)} words but {len(tags)} tags")
    unknown = next((t for t in tags if t not in known), None)
    if unknown is not None:
      raise DataError(f"{where}: unknown tag {unknown!r} of task {task.name}")
    examples.append(TaggingExample(len(examples), words, tags))
  return examples


def read_sentences(path: str) -> Iterator[TaggingExample]:
  """Sentences to tag, read as they come: JSON lines of {"words": [...]} (a path ending
  .jsonl), else one text line each (words split at whitespace), numbered by line from 0,
  blank lines skipped."""
  try:
    if path.endswith(".jsonl"):
      for number, record in json_lines(path):
        words = record.get("words") if isinstance(record, dict) else None
        if not (isinstance(words, list) and all(isinstance(w, str) for w in words)):
          raise at(path, number, 'expected a JSON object with "words", a list of strings')
        yield TaggingExample(number - 1, tuple(words))
    else:
      with _open(path) as f:
        yield from (split_line(eid, line.rstrip("\r\n")) for eid, line in enumerate(f)
                    if line.strip())
  except UnicodeDecodeError as e:
    raise DataError(f"{path}: not UTF-8 text (byte {e.start})") from None


def split_line(eid: int, line: str) -> TaggingExample:
  """A text line's words (split at whitespace, as str.split) and where each starts."""
  found = list(re.finditer(r"\S+", line))
  return TaggingExample(eid, tuple(m.group() for m in found), line=line,
                        starts=tuple(m.start() for m in found))


def to_bioes(tags: Sequence[str]) -> List[str]:
  """IOB1, IOB2 or BIOES tags to B-/I-/E-/S-/O labels, entity by entity as conlleval
  reads them."""
  labels = ["O"] * len(tags)
  for kind, first, last in entity_spans(tags):
    if first == last:
      labels[first] = "S-" + kind
    else:
      labels[first], labels[last] = "B-" + kind, "E-" + kind
      labels[first + 1:last] = ["I-" + kind] * (last - first - 1)
  return labels


def to_bio(labels: Sequence[str]) -> List[str]:
  """B-/I-/E-/S-/O labels (e.g. predictions) to B-/I-/O tags, label by label."""
  renamed = {"S": "B", "E": "I"}
  return [label if label == "O" else renamed.get(label[0], label[0]) + label[1:]
          for label in labels]


def as_labels(task: TaggingTask, tags: Sequence[str]) -> List[str]:
  """A sentence's tags as the model's labels (BIOES for an entity task)."""
  return list(tags) if task.scheme == "none" else to_bioes(tags)


def as_output_tags(task: TaggingTask, tags: Sequence[str]) -> List[str]:
  """A sentence's tags in the form --predict writes (IOB2 for an IOB task): gold tags
  compared with predicted ones word by word."""
  return to_bio(as_labels(task, tags)) if task.scheme in ("iob1", "iob2") else \
      as_labels(task, tags)


def windows(tokenizer: Tokenizer, examples: Sequence[TaggingExample], length: int,
            stride: int, task: Optional[TaggingTask] = None) -> Dict[str, np.ndarray]:
  """Every sentence's windows: int32 input_ids, input_mask, segment_ids, word_positions,
  word_labels (`task`'s, when the examples are labelled) [N, length], float32
  word_label_mask (the words whose first piece it holds, all trained on), the sentence
  and first word each window holds (sentence_index, first_word [N]), and word_owned
  [N, length] (the words it predicts: where they have the most context)."""
  vocab, room = tokenizer.vocab, length - 2
  # A word BERT's cleaning empties (only control characters) still needs a slot.
  words = WordPieces(tokenizer, (e.words for e in examples), empty_as_unk=True)
  label_id = {label: i for i, label in enumerate(task.labels if task else ())}
  rows = []  # (sentence, its first word, pieces, word positions, labels, owned words)
  for index, example in enumerate(examples):
    sentence, first, _ = words.pieces(example.words)
    labels = np.array([label_id[label] for label in (
        as_labels(task, example.tags) if example.tags else ())], np.int64)
    spans = doc_spans(len(sentence), room, stride)
    owner = max_context_owner(spans, len(sentence))[first]
    for window, (start, span) in enumerate(spans):
      begin, end = np.searchsorted(first, [start, start + span])
      rows.append((index, begin, sentence[start:start + span], 1 + first[begin:end] - start,
                   labels[begin:end], owner[begin:end] == window))
  n = len(rows)
  out = {name: np.zeros([n, length], np.int32) for name in (
      "input_ids", "input_mask", "segment_ids", "word_positions", "word_labels",
      "word_owned")}
  out["word_label_mask"] = np.zeros([n, length], np.float32)
  out["sentence_index"] = np.array([row[0] for row in rows], np.int32).reshape(n)
  out["first_word"] = np.array([row[1] for row in rows], np.int32).reshape(n)
  for i, (_, _, window_pieces, positions, labels, owned) in enumerate(rows):
    used, count = len(window_pieces) + 2, len(positions)
    out["input_ids"][i, :used] = [vocab.cls_id, *window_pieces, vocab.sep_id]
    out["input_mask"][i, :used] = 1
    # The original gives every piece of a tagging input segment id 1.
    out["segment_ids"][i, :used] = 1
    out["word_positions"][i, :count] = positions
    out["word_labels"][i, :len(labels)] = labels  # none when unlabeled
    out["word_label_mask"][i, :count] = 1.0
    out["word_owned"][i, :count] = owned
  return out


def predicted_tags(examples: Sequence[TaggingExample], features: Dict[str, np.ndarray],
                   logits: np.ndarray, output_tags: Sequence[str]) -> List[List[str]]:
  """Each sentence's tags (of output_tags), each word's from the window that owns it."""
  best = logits.argmax(-1)
  tags = [[output_tags[0]] * len(e.words) for e in examples]
  for row, column in zip(*np.nonzero(features["word_owned"])):
    word = features["first_word"][row] + column
    tags[features["sentence_index"][row]][word] = output_tags[best[row, column]]
  return tags


def entities(example: TaggingExample, tags: Sequence[str]) -> List[Dict[str, object]]:
  """The entities of a sentence's tags: type, text and where: characters of its line
  (line[start:end]), or words (words[start_word:end_word]) when it came as words."""
  found = []
  for kind, first, last in entity_spans(tags):
    if example.line is not None:
      start, end = example.starts[first], example.starts[last] + len(example.words[last])
      found.append({"type": kind, "text": example.line[start:end], "start": start,
                    "end": end})
    else:
      found.append({"type": kind, "text": " ".join(example.words[first:last + 1]),
                    "start_word": first, "end_word": last + 1})
  return found


def prediction_records(examples: Sequence[TaggingExample], features: Dict[str, np.ndarray],
                       logits: np.ndarray, output_tags: Sequence[str], with_entities: bool):
  """--predict's record of each sentence: index, words, tags (and an entity task's
  entities)."""
  records = []
  for example, tags in zip(examples, predicted_tags(examples, features, logits,
                                                    output_tags)):
    record = {"index": example.eid, "words": list(example.words), "tags": tags}
    if with_entities:
      record["entities"] = entities(example, tags)
    records.append(record)
  return records


def windows_note(examples: Sequence[TaggingExample], features: Dict[str, np.ndarray],
                 where: str, length: int, stride: int):
  """Says (a warning line) how many sentences are read in more than one window."""
  per_sentence = np.bincount(features["sentence_index"], minlength=len(examples))
  longer = int((per_sentence > 1).sum())
  if longer:
    logging.warning("%s: %d of %d sentences are longer than one window of max_seq_length "
                    "%d: read in %d windows, one every %d pieces (tagging_stride %d), "
                    "each word tagged from the one where it has the most context", where,
                    longer, len(examples), length,
                    int(per_sentence[per_sentence > 1].sum()), min(stride, length - 2),
                    stride)
