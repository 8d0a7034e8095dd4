"""The serving export: a SavedModel that takes raw UTF-8 strings, tokenizer inside.

Every fine-tuning run writes <model_dir>_<trial>/saved_model/ (a temporary directory
renamed into place). Its `serving_default` signature takes string tensors [B] and
returns the predictions of `run_finetuning.py --predict`:
- sentence tasks: text_a (and text_b for pair tasks) -> probabilities [B, C] float32,
  label_id [B] int64 and label [B] string; regression tasks -> score [B].
- tagging: text (words split at whitespace) -> tag [B, W] string (B-/I-/O, "" past
  the sentence's last word, "O" for words past max_seq_length) and tag_id [B, W] of the
  B-/I-/E-/S-/O labels the head predicts.
- QA: question, context -> answer [B] string, start, end [B] int64 (its characters
  context[start:end]; -1 for the "empty" placeholder of a question with no valid span),
  probability [B] float32 (its share of the n-best list); SQuAD 2.0-style tasks also
  no_answer_score [B] float32 (the null odds) and no_answer [B] bool (> qa_na_threshold).
  The graph does what --predict does with the run's FinetuningConfig: the context split
  into words at finetune/qa/data.py's separators, each word tokenized alone, the question
  cut to max_query_length pieces, windows every doc_stride pieces, each piece scored in
  its window of most context, the head's candidates (joint beam or independent n-best)
  ranked, max_answer_length, and the answer text aligned on the words as get_final_text
  does (so trimmed inside a word where the pieces are, the words of a multi-word answer
  joined by one space). The n-best list is deduplicated by text, so every kept
  candidate's text is computed (up to windows x beam_size^2 spans). Where --predict
  refuses an empty question or context, the graph answers ("empty" when the context has
  no words); a question that leaves no room for the context fails an assertion.
Loading needs tensorflow and tensorflow_text only (`import tensorflow_text` registers
its ops); the model's variables are saved, not the Keras objects.

In-graph tokenization (GraphTokenizer) reproduces data_prep/tokenizer.py, i.e. BERT's
rules, on every code point: its per-character steps are tables computed here from
Python's own unicodedata and str.lower, and it feeds FastWordpieceTokenizer (BERT's
WordPiece, as data_prep's).
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
from data_prep.tokenizer import _LONG_WORD_MARK
from finetune.qa import data as qa_data
from finetune.sentence import data as sentence_data
from finetune.tagging import data as tagging_data

SAVED_MODEL = "saved_model"
_SPACE, _MARK = 0x20, ord(_LONG_WORD_MARK)
# FastWordpieceTokenizer knows a byte limit only; words over 200 characters are the mark
# by then, so any limit above 200 characters of UTF-8 is BERT's.
_MAX_WORD_BYTES = 4 * ref.MAX_WORD_CHARS + 4
_CAPITAL_SIGMA, _FINAL_SIGMA = "\u03a3", "\u03c2"
_DROP, _KEEP, _TO_SPACE, _CJK = 0, 1, 2, 3
_WORD_SEPARATORS = np.array([ord(c) for c in qa_data.WORD_SEPARATORS], np.int32)


@functools.lru_cache(maxsize=None)  # seconds per process, not per export
def _code_point_classes():
  """Per code point: the step-1 action, Python-whitespace, BERT punctuation or space,
  and what QA's answer alignment skips (postprocess._is_skipped) (numpy)."""
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
  skipped = is_space | np.char.startswith(category, "C") | np.char.startswith(category, "Z")
  return action, is_space, space | punctuation, skipped


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
    action, python_space, not_word, skipped = _code_point_classes()
    self.lower_case, self.accents = lower_case, accents
    self._action_starts, self._actions = map(tf.constant, _runs(action))
    self._word_starts, self._word = map(tf.constant, _runs(~not_word))
    self._skipped_starts, self._skipped = map(tf.constant, _runs(skipped))
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

  def basic_text(self, text: tf.Tensor) -> tf.Tensor:
    """" ".join(data_prep.tokenizer.basic_words(text)) of a string tensor [B]."""
    chars = tf.strings.unicode_decode(self.normalize(text), "UTF-8")
    cps = chars.values
    word = tf.cast(self._lookup(self._word_starts, self._word, cps), tf.bool)
    # After normalize() the only white space left is U+0020.
    punctuation = ~word & tf.not_equal(cps, _SPACE)
    space = tf.fill(tf.shape(cps), _SPACE)
    out = tf.where(punctuation[:, None], tf.stack([space, cps, space], 1), _pad(cps, 3))
    text = tf.strings.unicode_encode(_replace_chars(chars, out), "UTF-8")
    return tf.strings.strip(tf.strings.regex_replace(text, " +", " "))

  def skipped(self, cps: tf.Tensor) -> tf.Tensor:
    """Whether QA's answer alignment skips each code point (postprocess._is_skipped)."""
    return tf.cast(self._lookup(self._skipped_starts, self._skipped, cps), tf.bool)


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


def _like(ragged: tf.RaggedTensor, value) -> tf.RaggedTensor:
  """A ragged tensor of ragged's shape full of `value` (a typed scalar)."""
  return ragged.with_values(tf.fill(tf.shape(ragged.values), value))


def _row_positions(ragged: tf.RaggedTensor) -> tf.Tensor:
  """Each value's position in its row (flat, int64)."""
  return tf.range(tf.size(ragged.values, out_type=tf.int64)) - tf.gather(
      ragged.row_starts(), ragged.value_rowids())


def _row_cumsum(ragged: tf.RaggedTensor) -> tf.RaggedTensor:
  """The exclusive cumulative sum of each row (int64)."""
  total = tf.cumsum(tf.cast(ragged.values, tf.int64), exclusive=True)
  return ragged.with_values(total - tf.gather(total, tf.gather(ragged.row_starts(),
                                                               ragged.value_rowids())))


def _gather_at(ragged: tf.RaggedTensor, index: tf.Tensor, valid: tf.Tensor) -> tf.Tensor:
  """ragged[row, index[row]] where valid (index inside its row), else 0."""
  values = tf.concat([ragged.values, tf.zeros([1], ragged.dtype)], 0)
  size = tf.size(ragged.values, out_type=tf.int64)
  return tf.gather(values, tf.where(valid, ragged.row_starts() + tf.cast(index, tf.int64),
                                    size))


def _split_context(context: tf.Tensor):
  """finetune/qa/data.py's split_words on a string tensor [B]: the words [B, W] and
  their first characters' offsets in the context and lengths, in characters [B, W]."""
  chars = tf.strings.unicode_decode(context, "UTF-8", errors="replace",
                                    replacement_char=0xFFFD)
  cps = chars.values
  space = tf.reduce_any(tf.equal(cps[:, None], _WORD_SEPARATORS), -1)
  position = _row_positions(chars)
  first = ~space & (tf.concat([[True], space], 0)[:-1] | tf.equal(position, 0))
  word_of_char = tf.cumsum(tf.cast(first, tf.int64)) - 1
  letters = tf.RaggedTensor.from_value_rowids(
      tf.boolean_mask(cps, ~space), tf.boolean_mask(word_of_char, ~space),
      nrows=tf.reduce_sum(tf.cast(first, tf.int64)))
  words = tf.RaggedTensor.from_value_rowids(
      tf.strings.unicode_encode(letters, "UTF-8"), tf.boolean_mask(chars.value_rowids(), first),
      nrows=chars.nrows())
  return (words, words.with_values(tf.boolean_mask(position, first)),
          words.with_values(letters.row_lengths()))


def _final_spans(tokenizer: "GraphTokenizer", orig_text: tf.Tensor, pred_text: tf.Tensor):
  """finetune/qa/postprocess.py's final_span on string tensors [N]: [start, end) in
  characters of the part of orig_text that pred_text covers, or all of orig_text."""
  tok_text = tokenizer.basic_text(orig_text)
  tok_length = tf.strings.length(tok_text, unit="UTF8_CHAR")
  pred_length = tf.strings.length(pred_text, unit="UTF8_CHAR")
  # str.find: the first place in tok_text where pred_text is.
  places = tf.ragged.range(tf.maximum(tok_length - pred_length + 1, 0))
  row = places.value_rowids()
  found_at = tf.equal(tf.strings.substr(tf.gather(tok_text, row), places.values,
                                        tf.gather(pred_length, row), unit="UTF8_CHAR"),
                      tf.gather(pred_text, row))
  start = tf.math.unsorted_segment_min(tf.where(found_at, places.values, tf.int32.max),
                                       row, tf.size(tok_text))
  end = start + pred_length - 1
  orig = tf.strings.unicode_decode(orig_text, "UTF-8")
  tok = tf.strings.unicode_decode(tok_text, "UTF-8")
  orig_kept = tf.ragged.boolean_mask(orig.with_values(_row_positions(orig)),
                                     orig.with_values(~tokenizer.skipped(orig.values)))
  tok_kept = tok.with_values(~tokenizer.skipped(tok.values))
  stripped = _row_cumsum(tok_kept)  # a tok_text character's place without the skipped
  inside = lambda i: (i >= 0) & (i < tok_length)
  valid = (tf.less(start, tf.int32.max) & inside(start) & inside(end) &
           tf.equal(orig_kept.row_lengths(), tf.reduce_sum(tf.cast(tok_kept, tf.int64), 1)))
  valid &= _gather_at(tok_kept, start, valid) & _gather_at(tok_kept, end, valid)
  first = _gather_at(orig_kept, _gather_at(stripped, start, valid), valid)
  last = _gather_at(orig_kept, _gather_at(stripped, end, valid), valid)
  whole = tf.cast(orig.row_lengths(), tf.int64)
  return tf.where(valid, first, 0), tf.where(valid, last + 1, whole)


def _window_candidates(outputs, n_best_size: int):
  """postprocess.window_candidates on every window: start, end [N, C] and their
  scores, in its order."""
  if "start_top_index" in outputs:  # the joint head's beam of starts, each with its ends
    beam = outputs["start_top_index"].shape[-1]
    repeat = lambda x: tf.repeat(x, beam, axis=1)
    flat = lambda x: tf.reshape(x, [tf.shape(x)[0], beam * beam])
    return (repeat(outputs["start_top_index"]), flat(outputs["end_top_index"]),
            repeat(outputs["start_top_log_probs"]), flat(outputs["end_top_log_probs"]))
  k = min(n_best_size, outputs["start_logits"].shape[-1])
  # top_k lists equal logits lower index first, as best_indexes' stable sort.
  starts = tf.math.top_k(outputs["start_logits"], k)
  ends = tf.math.top_k(outputs["end_logits"], k)
  return (tf.repeat(starts.indices, k, axis=1), tf.tile(ends.indices, [1, k]),
          tf.repeat(starts.values, k, axis=1), tf.tile(ends.values, [1, k]))


class ServingModule(tf.Module):
  """The model's variables, the tokenizer and one prediction function per task."""

  def __init__(self, model, runners, vocab, lower_case: bool, max_seq_length: int):
    super().__init__(name="serving")
    self.tokenizer = GraphTokenizer(vocab.tokens, lower_case, lower_case)
    self.model_variables = list(model.variables)
    self._length = max_seq_length
    self._cls, self._sep, self._unk = vocab.cls_id, vocab.sep_id, vocab.unk_id
    self._vocab_tokens = list(vocab.tokens)

    def head(runner, batch):  # a closure: the Keras objects themselves are not saved
      hidden = model.encoder(batch, training=False)
      return model.heads[runner.head_name](hidden, batch, training=False)
    self._head = head
    functions = {}
    for runner in runners:
      function = self._function(runner)
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
    return self._qa_function(runner)

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

  def _qa_windows(self, question, words, config):
    """finetune/qa/features.py's featurize: the model inputs of every window [N, L],
    its example [N], each position's context word (-1 outside the context) and whether
    the window is the piece's one with the most context [N, L]."""
    length, tokenizer = self._length, self.tokenizer
    question = tf.strings.reduce_join(tf_text.regex_split(
        question, tokenizer.split_pattern), axis=1, separator=" ")  # str.split() joined
    query = tokenizer(question)[:, :config.max_query_length]
    pieces = tokenizer(words.values)  # each word alone, so each piece knows its word
    piece_example = tf.gather(words.value_rowids(), pieces.value_rowids())
    context = tf.RaggedTensor.from_value_rowids(pieces.values, piece_example,
                                                nrows=words.nrows())
    piece_word = pieces.value_rowids() - tf.gather(words.row_starts(), piece_example)
    n, room = context.row_lengths(), length - 3 - query.row_lengths()
    with tf.control_dependencies([tf.debugging.assert_positive(room, message=(
        f"question pieces leave no room for the context in max_seq_length {length}; "
        f"the model was exported with max_query_length {config.max_query_length}"))]):
      stride = tf.minimum(room, config.doc_stride)
    # doc_spans in closed form: windows every min(room, doc_stride) pieces until the end.
    count = tf.where(n > room, (n - room + stride - 1) // stride + 1, tf.ones_like(n))
    windows = tf.ragged.range(count)
    example = windows.value_rowids()
    first = windows.values * tf.gather(stride, example)
    span = tf.minimum(tf.gather(n, example) - first, tf.gather(room, example))
    position = tf.ragged.range(first, first + span)
    window = position.value_rowids()
    piece = position.values + tf.gather(context.row_starts(), tf.gather(example, window))
    # max_context_owner: the best score's first window.
    p, s, l = position.values, tf.gather(first, window), tf.gather(span, window)
    score = (tf.cast(tf.minimum(p - s, s + l - 1 - p), tf.float64) +
             0.01 * tf.cast(l, tf.float64))
    pieces_total = tf.size(context.values, out_type=tf.int64)
    best = tf.gather(tf.math.unsorted_segment_max(score, piece, pieces_total), piece)
    owner = tf.math.unsorted_segment_min(
        tf.where(tf.equal(score, best), window, tf.int64.max), piece, pieces_total)
    query = tf.gather(query, example)
    head = _concat([_column(self._cls, query), query, _column(self._sep, query)])
    tail = _column(self._sep, query)
    ids = _concat([head, position.with_values(tf.gather(context.values, piece)), tail])
    segments = _concat([tf.zeros_like(head), _like(position, 1), _like(tail, 1)])
    no_word = tf.constant(-1, tf.int64)
    token_word = _concat([_like(head, no_word), position.with_values(
        tf.gather(piece_word, piece)), _like(tail, no_word)])
    max_context = _concat([_like(head, False), position.with_values(
        tf.equal(tf.gather(owner, piece), window)), _like(tail, False)])
    shape = [None, length]
    return (_model_inputs(ids, segments, length), example,
            token_word.to_tensor(-1, shape=shape), max_context.to_tensor(False, shape=shape))

  def _qa_function(self, runner):
    """The answer of every (question, context): postprocess.predict_answers over the
    windows of finetune/qa/features.py, as runner.prediction_records reports it."""
    config, v2 = runner.config, runner.task.v2
    tokenizer, vocab = self.tokenizer, tf.constant(self._vocab_tokens)
    spec = tf.TensorSpec([None], tf.string)

    @tf.function(input_signature=[spec, spec])
    def answer(question, context):
      batch = tf.size(context, out_type=tf.int64)
      words, word_offsets, word_lengths = _split_context(context)
      inputs, window_example, token_word, max_context = self._qa_windows(
          question, words, config)
      outputs = self._head(runner, inputs)
      starts, ends, start_scores, end_scores = _window_candidates(outputs,
                                                                  config.n_best_size)
      first_word = tf.gather(token_word, starts, batch_dims=1)
      last_word = tf.gather(token_word, ends, batch_dims=1)
      keep = ((first_word >= 0) & (last_word >= 0) &
              tf.gather(max_context, starts, batch_dims=1) & (ends >= starts) &
              (ends - starts + 1 <= config.max_answer_length))
      window = tf.where(keep)[:, 0]  # the window of each kept candidate, in mask order
      candidates = [tf.boolean_mask(x, keep) for x in (starts, ends, start_scores,
                                                       end_scores, first_word, last_word)]
      # Best first (stable), then by example (stable): each example's ranked spans.
      order = tf.argsort(candidates[2] + candidates[3], direction="DESCENDING", stable=True)
      order = tf.gather(order, tf.argsort(tf.cast(tf.gather(tf.gather(
          window_example, window), order), tf.int32), stable=True))
      window, (start, end, start_score, end_score, first_word, last_word) = (
          tf.gather(window, order), [tf.gather(x, order) for x in candidates])
      example = tf.gather(window_example, window)

      # Each span's text: its pieces read back and aligned on its words (get_final_text).
      word_base = tf.gather(words.row_starts(), example)
      span_words = tf.ragged.range(word_base + first_word, word_base + last_word + 1)
      orig_text = tf.strings.reduce_join(tf.gather(words.values, span_words), axis=1,
                                         separator=" ")
      at = tf.cast(window, tf.int32) * self._length
      ids = tf.gather(tf.reshape(inputs["input_ids"], [-1]),
                      tf.ragged.range(at + start, at + end + 1))
      pred_text = tf.strings.reduce_join(tf.gather(vocab, ids), axis=1, separator=" ")
      pred_text = tf.strings.regex_replace(tf.strings.regex_replace(
          pred_text, " ##", ""), "##", "")
      pred_text = tf.strings.reduce_join(tf_text.regex_split(
          pred_text, tokenizer.split_pattern), axis=1, separator=" ")
      span_start, span_end = _final_spans(tokenizer, orig_text, pred_text)
      text = tf.strings.substr(orig_text, span_start, span_end - span_start,
                               unit="UTF8_CHAR")
      # postprocess.context_span: from the words joined by single spaces to the context.
      joined = _row_cumsum(tf.gather(word_lengths.values, span_words) + 1)

      def in_context(place):
        row = joined.value_rowids()
        word = tf.math.unsorted_segment_sum(tf.cast(
            joined.values <= tf.gather(place, row), tf.int64), row, tf.size(place)) - 1
        return (tf.gather(word_offsets.values, word_base + first_word + word) + place -
                _gather_at(joined, word, tf.ones_like(place, tf.bool)))

      # The n-best list: the first n_best_size distinct texts of each example.
      total = tf.cast(start_score, tf.float64) + tf.cast(end_score, tf.float64)
      rank = tf.range(tf.size(text))
      texts, text_id = tf.unique(tf.strings.join([tf.strings.as_string(example), text],
                                                 ":"))
      distinct = tf.equal(tf.gather(tf.math.unsorted_segment_min(
          rank, text_id, tf.size(texts)), text_id), rank)
      count = tf.cumsum(tf.cast(distinct, tf.int32))
      before = tf.math.unsorted_segment_min(count - tf.cast(distinct, tf.int32),
                                            example, batch)
      listed = distinct & (count - tf.gather(before, example) <= config.n_best_size)
      # Each example's best span: its first; softmax over its n-best list (float64).
      best = tf.math.unsorted_segment_min(rank, example, batch)
      has_answer = best < tf.size(text)

      def pick(values, default):
        return tf.gather(tf.concat([values, [default]], 0),
                         tf.where(has_answer, best, tf.size(text)))

      listed_total, listed_example = tf.boolean_mask(total, listed), tf.boolean_mask(
          example, listed)
      top = tf.math.unsorted_segment_max(listed_total, listed_example, batch)
      norm = tf.math.unsorted_segment_sum(
          tf.exp(listed_total - tf.gather(top, listed_example)), listed_example, batch)
      probability = tf.exp(total - tf.gather(top, example)) / tf.gather(norm, example)
      result = {"answer": pick(text, "empty"),
                "start": pick(in_context(span_start), tf.constant(-1, tf.int64)),
                "end": pick(in_context(span_end - 1) + 1, tf.constant(-1, tf.int64)),
                "probability": tf.cast(pick(probability, tf.constant(1.0, tf.float64)),
                                       tf.float32)}
      if v2:
        if config.answerable_classifier:
          null = outputs["answerable_logit"]
        else:
          null = outputs["start_logits"][:, 0]
          if "end_logits" in outputs:  # the joint head scores ends only after a start
            null += outputs["end_logits"][:, 0]
        odds = tf.cast(tf.math.unsorted_segment_min(null, window_example, batch),
                       tf.float64)
        if not config.answerable_classifier:
          zero = tf.constant(0.0, tf.float64)
          odds = (odds - pick(tf.cast(start_score, tf.float64), zero) -
                  pick(tf.cast(end_score, tf.float64), zero))
        result.update(no_answer_score=tf.cast(odds, tf.float32),
                      no_answer=odds > config.qa_na_threshold)
      return result
    return answer


def export(model, runners, vocab, lower_case: bool, max_seq_length: int,
           model_dir: str) -> str:
  """Writes <model_dir>/saved_model (temp dir, then renamed); returns its path."""
  module = ServingModule(model, runners, vocab, lower_case, max_seq_length)
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
