"""The serving export: a SavedModel that takes raw UTF-8 strings, tokenizer inside.

Every fine-tuning run writes <model_dir>_<trial>/saved_model/ (a temporary directory
renamed into place). Its `serving_default` signature takes string tensors [B] and
returns the predictions of `run_finetuning.py --predict`:
- sentence tasks: text_a (and text_b for pair tasks) -> probabilities [B, C] float32,
  label_id [B] int64 and label [B] string; regression tasks -> score [B].
- tagging: text (words split at whitespace) -> tag [B, W] string (B-/I-/O, "" past
  the sentence's last word, "O" for words past max_seq_length) and tag_id [B, W] of the
  B-/I-/E-/S-/O labels the head predicts.
QA is not exported yet (its windowing and answer extraction run outside the model).
Loading needs tensorflow and tensorflow_text only (`import tensorflow_text` registers
its ops); the model's variables are saved, not the Keras objects.

In-graph tokenization (GraphTokenizer) reproduces data_prep/tokenizer.py, i.e. BERT's
rules, on every code point: its per-character steps are tables computed here from
Python's own unicodedata and str.lower, and it feeds the same FastWordpieceTokenizer.
tests/test_serving.py checks it on the tokenizer parity tests' inputs (every code point
alone, inside a word and between capital sigmas; the adversarial lines; the shared
corpus). Steps, as in data_prep's normalize():
1. drop control characters, U+0000 and U+FFFD; whitespace -> " "; spaces around CJK;
2. (lower-casing) U+03A3 in Python's Final_Sigma context -> U+03C2, by a regex over
   the cased / case-ignorable classes that str.lower itself reveals;
3. (lower-casing, accents) each character -> its str.lower, NFD, without Mn marks;
4. a run of over 200 word characters -> U+E000, which WordPiece maps to [UNK].
Differences, by design of the graph's input rather than of the rules: invalid UTF-8
bytes become U+FFFD (then dropped, as data_prep's readers' replacement characters are).
The one rule it cannot follow: step 3 maps each character alone, while NFD of a whole
text also sorts adjacent combining characters by class. The Mn marks among them are
dropped anyway, but 25 spacing marks (Mc) have a class, and where one of class 224/226
(U+302E, U+302F, U+1D16D) precedes one of a lower class (U+1715 ... U+1D172, class 6,
9 or 216) with only Mn marks between, data_prep swaps the two and the graph does not
(e.g. U+1D16D U+1D165; with lower-casing on only). Every code point alone or inside a
word tokenizes identically.
"""

import functools
import os
import shutil
import sys
import tempfile
import unicodedata
from typing import List, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from data_prep import reference_tokenizer as ref
from data_prep.tokenizer import _LONG_WORD_MARK, _MAX_WORD_BYTES
from finetune.sentence import data as sentence_data
from finetune.tagging import data as tagging_data

SAVED_MODEL = "saved_model"
_SPACE, _MARK = 0x20, ord(_LONG_WORD_MARK)
_CAPITAL_SIGMA, _FINAL_SIGMA = "\u03a3", "\u03c2"
_DROP, _KEEP, _TO_SPACE, _CJK = 0, 1, 2, 3


@functools.lru_cache(maxsize=None)  # seconds per process, not per export
def _code_point_classes():
  """Per code point: the step-1 action, Python-whitespace, BERT punctuation (numpy)."""
  code_points = np.arange(sys.maxunicode + 1)
  category = np.array([unicodedata.category(chr(cp)) for cp in code_points])
  is_space = np.array([chr(cp).isspace() for cp in code_points])
  control = np.char.startswith(category, "C") & ~np.isin(code_points, [9, 10, 13])
  space = (is_space | (category == "Zs")) & ~control
  punctuation = np.char.startswith(category, "P") | np.isin(
      code_points, [cp for cp in range(128) if ref.is_punctuation(chr(cp))])
  action = np.full(len(code_points), _KEEP, np.int32)
  for lo, hi in ref.CJK_RANGES:
    action[lo:hi + 1] = _CJK
  action[space] = _TO_SPACE
  action[control | np.isin(code_points, [0, 0xFFFD])] = _DROP
  return action, is_space, space | punctuation


def _runs(values: np.ndarray):
  """(starts, values) of the runs of equal values: a table for tf.searchsorted."""
  starts = np.concatenate([[0], np.flatnonzero(values[1:] != values[:-1]) + 1])
  return starts.astype(np.int32), values[starts].astype(np.int32)


def _re2_class(code_points) -> str:
  """An RE2 character class of the code points (surrogates left out)."""
  cps = sorted(cp for cp in code_points if not 0xD800 <= cp < 0xE000)
  ranges, start = [], None
  for i, cp in enumerate(cps):
    start = cp if start is None else start
    if i + 1 == len(cps) or cps[i + 1] != cp + 1:
      ranges.append(f"\\x{{{start:x}}}" + (f"-\\x{{{cp:x}}}" if cp > start else ""))
      start = None
  return "[" + "".join(ranges) + "]"


@functools.lru_cache(maxsize=None)
def _sigma_pattern() -> str:
  """A regex of U+03A3 in Python's Final_Sigma context (str.lower's one context rule):
  a cased character, case-ignorables, the sigma, case-ignorables, then no cased one.
  Python's cased / case-ignorable sets are read off str.lower's behaviour."""
  cased, ignorable = [], []
  for cp in np.flatnonzero(_code_point_classes()[0] != _DROP):
    ch = chr(cp)
    if 0xD800 <= cp < 0xE000:
      continue
    if (ch + _CAPITAL_SIGMA).lower().endswith(_FINAL_SIGMA):
      cased.append(cp)  # cased and not case-ignorable: it stops the context scan
    elif ("A" + ch + _CAPITAL_SIGMA).lower().endswith(_FINAL_SIGMA):
      ignorable.append(cp)
  c, i = _re2_class(cased), _re2_class(ignorable)
  other = "[^" + c[1:-1] + i[1:-1] + "]"
  return f"({c}{i}*)\\x{{3a3}}({i}*(?:{other}|$))"


@functools.lru_cache(maxsize=None)
def _char_map(lower_case: bool, accents: bool):
  """Sorted code points that step 3 changes and their replacements ([K, width], -1
  padded): str.lower, then NFD without Mn marks."""
  keys, values = [], []
  for cp in np.flatnonzero(_code_point_classes()[0] != _DROP):
    ch = chr(cp)
    if 0xD800 <= cp < 0xE000:
      continue
    out = ch.lower() if lower_case else ch
    if accents:
      out = "".join(c for c in unicodedata.normalize("NFD", out)
                    if unicodedata.category(c) != "Mn")
    if out != ch:
      keys.append(cp)
      values.append([ord(c) for c in out])
  width = max(map(len, values))
  table = np.full([len(keys), width], -1, np.int32)
  for row, value in enumerate(values):
    table[row, :len(value)] = value
  return np.array(keys, np.int32), table


def _replace_chars(chars: tf.RaggedTensor, replacements: tf.Tensor) -> tf.RaggedTensor:
  """Each character of `chars` [B, None] replaced by its row of `replacements`
  [N, width] (N = its number of characters, -1 padded)."""
  pieces = tf.ragged.boolean_mask(replacements, replacements >= 0)
  return tf.RaggedTensor.from_row_splits(pieces, chars.row_splits).merge_dims(1, 2)


def _pad(values: tf.Tensor, width: int) -> tf.Tensor:
  return tf.pad(values[:, None], [[0, 0], [0, width - 1]], constant_values=-1)


class GraphTokenizer(tf.Module):
  """Strings [B] -> ragged int32 WordPiece ids [B, None], as data_prep's Tokenizer."""

  def __init__(self, vocab_tokens: Sequence[str], lower_case: bool = True,
               accents: bool = True):
    super().__init__(name="tokenizer")
    action, python_space, not_word = _code_point_classes()
    self.lower_case, self.accents = lower_case, accents
    self._action_starts, self._actions = map(tf.constant, _runs(action))
    self._word_starts, self._word = map(tf.constant, _runs(~not_word))
    self._sigma = _sigma_pattern() if lower_case else None
    if lower_case or accents:
      keys, table = _char_map(lower_case, accents)
      self._map_keys, self._map_table = tf.constant(keys), tf.constant(table)
    # Python's str.split() whitespace: how --predict splits a tagging sentence.
    self.split_pattern = _re2_class(np.flatnonzero(python_space)) + "+"
    self._wordpiece = tf_text.FastWordpieceTokenizer(
        vocab=list(vocab_tokens), suffix_indicator="##",
        max_bytes_per_word=_MAX_WORD_BYTES, token_out_type=tf.int32,
        unknown_token=ref.UNK, no_pretokenization=False, support_detokenization=False)

  @staticmethod
  def _lookup(starts, values, cps):
    return tf.gather(values, tf.searchsorted(starts, cps, side="right") - 1)

  def normalize(self, text: tf.Tensor) -> tf.Tensor:
    """data_prep.tokenizer.normalize on a string tensor [B]."""
    chars = tf.strings.unicode_decode(text, "UTF-8", errors="replace",
                                      replacement_char=0xFFFD)
    cps = chars.flat_values
    action = self._lookup(self._action_starts, self._actions, cps)
    keep = tf.where(action == _DROP, -1, tf.where(action == _TO_SPACE, _SPACE, cps))
    cjk = action == _CJK
    step1 = tf.stack([tf.where(cjk, _SPACE, keep), tf.where(cjk, cps, -1),
                      tf.where(cjk, _SPACE, -1)], axis=1)
    chars = _replace_chars(chars, step1)
    if self._sigma:
      text = tf.strings.regex_replace(tf.strings.unicode_encode(chars, "UTF-8"),
                                      self._sigma, "\\1\u03c2\\2")
      chars = tf.strings.unicode_decode(text, "UTF-8")
    if self.lower_case or self.accents:
      cps = chars.flat_values
      index = tf.minimum(tf.searchsorted(self._map_keys, cps), len(self._map_keys) - 1)
      mapped = tf.equal(tf.gather(self._map_keys, index), cps)
      width = self._map_table.shape[1]
      chars = _replace_chars(chars, tf.where(mapped[:, None],
                                             tf.gather(self._map_table, index),
                                             _pad(cps, width)))
    return tf.strings.unicode_encode(self._mark_long_words(chars), "UTF-8")

  def _mark_long_words(self, chars: tf.RaggedTensor) -> tf.RaggedTensor:
    """Runs of over 200 word characters (neither space nor punctuation) -> U+E000."""
    cps = chars.flat_values
    word = tf.cast(self._lookup(self._word_starts, self._word, cps), tf.bool)
    row = chars.value_rowids()
    new_row = tf.concat([[True], row[1:] != row[:-1]], 0)
    run = tf.cumsum(tf.cast(~word | new_row, tf.int32)) - 1
    run_length = tf.math.unsorted_segment_sum(tf.cast(word, tf.int32), run, tf.size(run))
    long = word & (tf.gather(run_length, run) > ref.MAX_WORD_CHARS)
    previous_long = tf.concat([[False], long[:-1]], 0)
    first = long & ~(previous_long & ~new_row)
    out = tf.where(long[:, None], -1, _pad(cps, 3))
    out = tf.where(first[:, None], tf.constant([[_SPACE, _MARK, _SPACE]]), out)
    return _replace_chars(chars, out)

  def __call__(self, text: tf.Tensor) -> tf.RaggedTensor:
    """WordPiece ids [B, None] of a string tensor [B]."""
    return self._wordpiece.tokenize(self.normalize(text))


def _concat(parts: List[tf.RaggedTensor]) -> tf.RaggedTensor:
  return tf.concat(parts, axis=1)


def _column(value, like: tf.RaggedTensor) -> tf.RaggedTensor:
  """A ragged [B, 1] of `value` for every row of `like`."""
  column = tf.fill([like.nrows(), 1], tf.constant(value, tf.int32))
  return tf.RaggedTensor.from_tensor(column)


def _keep_first(pieces: tf.RaggedTensor, counts: tf.Tensor) -> tf.RaggedTensor:
  """Each row's first counts[row] items."""
  return tf.ragged.boolean_mask(
      pieces, tf.ragged.range(pieces.row_lengths()) < counts[:, None])


def _model_inputs(ids: tf.RaggedTensor, segments: tf.RaggedTensor, length: int):
  shape = [None, length]
  return {"input_ids": ids.to_tensor(0, shape=shape),
          "input_mask": tf.ones_like(ids).to_tensor(0, shape=shape),
          "segment_ids": segments.to_tensor(0, shape=shape)}


class ServingModule(tf.Module):
  """The model's variables, the tokenizer and one prediction function per task."""

  def __init__(self, model, runners, vocab, lower_case: bool, max_seq_length: int):
    super().__init__(name="serving")
    self.tokenizer = GraphTokenizer(vocab.tokens, lower_case, lower_case)
    self.model_variables = list(model.variables)
    self._length = max_seq_length
    self._cls, self._sep, self._unk = vocab.cls_id, vocab.sep_id, vocab.unk_id

    def head(runner, batch):  # a closure: the Keras objects themselves are not saved
      hidden = model.encoder(batch, training=False)
      return model.heads[runner.head_name](hidden, batch, training=False)
    self._head = head
    functions = {}
    for runner in runners:
      function = self._function(runner)
      if function is not None:
        functions[runner.task.name.replace("/", "_")] = function
        functions.setdefault("serving_default", function)
    self.functions = functions

  def _function(self, runner):
    task = runner.task
    if isinstance(task, sentence_data.SentenceTask):
      pair = sentence_data.unlabeled_layout(task)[1].text_b is not None
      return self._sentence_function(runner, pair)
    if isinstance(task, tagging_data.TaggingTask):
      return self._tagging_function(runner)
    return None

  def _sentence_function(self, runner, pair: bool):
    task, length = runner.task, self._length
    labels = tf.constant(task.labels or [""])
    spec = tf.TensorSpec([None], tf.string)

    def outputs(batch):
      out = self._head(runner, batch)
      if task.is_regression:
        return {"score": out}
      label_id = tf.argmax(out, -1)
      return {"probabilities": tf.nn.softmax(out), "label_id": label_id,
              "label": tf.gather(labels, label_id)}

    def encode(a, b=None):
      cls, sep = _column(self._cls, a), _column(self._sep, a)
      if b is None:
        a = a[:, :length - 2]
        ids = _concat([cls, a, sep])
        return _model_inputs(ids, tf.zeros_like(ids), length)
      # The original's truncation in closed form: the longer loses pieces, B on a tie.
      budget = tf.constant(length - 3, tf.int64)
      len_a, len_b = a.row_lengths(), b.row_lengths()
      keep_b = tf.minimum(len_b, tf.maximum(budget // 2, budget - len_a))
      a, b = _keep_first(a, tf.minimum(len_a, budget - keep_b)), _keep_first(b, keep_b)
      first = _concat([cls, a, sep])
      second = _concat([b, _column(self._sep, b)])
      return _model_inputs(_concat([first, second]),
                           _concat([tf.zeros_like(first), tf.ones_like(second)]), length)

    if pair:
      return tf.function(lambda text_a, text_b: outputs(encode(
          self.tokenizer(text_a), self.tokenizer(text_b))), input_signature=[spec, spec])
    return tf.function(lambda text_a: outputs(encode(self.tokenizer(text_a))),
                       input_signature=[spec])

  def _tagging_function(self, runner):
    length = self._length
    tags = tf.constant(tagging_data.to_bio(runner.labels))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def tag(text):
      words = tf_text.regex_split(text, self.tokenizer.split_pattern)
      pieces = self.tokenizer(words.flat_values)
      # A word BERT's cleaning empties still gets a slot: [UNK], as in --predict.
      empty = tf.equal(pieces.row_lengths(), 0)
      pieces = tf.ragged.boolean_mask(
          _concat([pieces, _column(self._unk, pieces)]),
          _concat([tf.ones_like(pieces, tf.bool), tf.RaggedTensor.from_tensor(
              empty[:, None])]))
      counts = tf.cast(pieces.row_lengths(), tf.int32)
      # Each word's last piece + 1 within its sentence; words fit while [SEP] does.
      before = tf.cumsum(counts, exclusive=True)
      ends = before + counts - tf.gather(before, tf.gather(words.row_starts(),
                                                           words.value_rowids()))
      kept = words.with_flat_values(ends + 2 <= length)
      positions = tf.ragged.boolean_mask(words.with_flat_values(1 + ends - counts), kept)
      word_pieces = tf.RaggedTensor.from_row_splits(pieces, words.row_splits)
      word_pieces = tf.ragged.boolean_mask(word_pieces, kept).merge_dims(1, 2)
      ids = _concat([_column(self._cls, word_pieces), word_pieces,
                     _column(self._sep, word_pieces)])
      batch = _model_inputs(ids, tf.ones_like(ids), length)
      batch["word_positions"] = positions.to_tensor(0, shape=[None, length])
      best = tf.argmax(self._head(runner, batch), -1, output_type=tf.int32)
      # Words past max_seq_length are O (label 0); -1 and "" pad past a sentence's end.
      in_model = positions.row_lengths()
      cut = words.row_lengths() - in_model
      width = tf.maximum(tf.reduce_max(cut), 0)
      tag_id = _concat([tf.RaggedTensor.from_tensor(best, lengths=in_model),
                        tf.RaggedTensor.from_tensor(tf.zeros([words.nrows(), width],
                                                             tf.int32), lengths=cut)])
      return {"tag_id": tag_id.to_tensor(-1),
              "tag": tf.gather(tags, tag_id).to_tensor("")}
    return tag


def export(model, runners, vocab, lower_case: bool, max_seq_length: int,
           model_dir: str) -> str:
  """Writes <model_dir>/saved_model (temp dir, then renamed); its path, or "" when no
  task of the run can be served yet (QA)."""
  module = ServingModule(model, runners, vocab, lower_case, max_seq_length)
  if not module.functions:
    return ""
  path = os.path.join(model_dir, SAVED_MODEL)
  tmp = tempfile.mkdtemp(prefix=f".{SAVED_MODEL}.", dir=model_dir)
  try:
    tf.saved_model.save(module, tmp, signatures=module.functions)
    old = path + ".old"
    if os.path.exists(path):
      os.replace(path, old)
    os.replace(tmp, path)
    shutil.rmtree(old, ignore_errors=True)
  except BaseException:
    shutil.rmtree(tmp, ignore_errors=True)
    raise
  return path
