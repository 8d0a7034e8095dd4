"""A QA task's serving function (finetune/serving.py): questions and contexts in, the
answers of --predict out, computed in the graph as the evaluation computes them."""

import collections

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from data_prep.reference_tokenizer import CJK_RANGES
from finetune import serving
from finetune.graph_tokenizer import GraphTokenizer
from finetune.qa.data import WORD_SEPARATORS as SEPARATORS

WORD_SEPARATORS = np.array([ord(c) for c in SEPARATORS], np.int32)
CJK_FIRST, CJK_LAST = np.array(CJK_RANGES, np.int32).T


def split_context(context: tf.Tensor):
  """finetune/qa/data.py's split_words on a string tensor [B]: the words [B, W] and
  their first characters' offsets in the context and lengths, in characters [B, W]."""
  chars = tf.strings.unicode_decode(context, "UTF-8", errors="replace",
                                    replacement_char=0xFFFD)
  cps = chars.values
  space = tf.reduce_any(tf.equal(cps[:, None], WORD_SEPARATORS), -1)
  cjk = tf.reduce_any((cps[:, None] >= CJK_FIRST) & (cps[:, None] <= CJK_LAST), -1)
  position = serving.row_positions(chars)
  # A word starts after a separator or a CJK character, and at each CJK character.
  first = ~space & (tf.concat([[True], space | cjk], 0)[:-1] | cjk |
                    tf.equal(position, 0))
  word_of_char = tf.cumsum(tf.cast(first, tf.int64)) - 1
  letters = tf.RaggedTensor.from_value_rowids(
      tf.boolean_mask(cps, ~space), tf.boolean_mask(word_of_char, ~space),
      nrows=tf.reduce_sum(tf.cast(first, tf.int64)))
  words = tf.RaggedTensor.from_value_rowids(
      tf.strings.unicode_encode(letters, "UTF-8"), tf.boolean_mask(chars.value_rowids(), first),
      nrows=chars.nrows())
  return (words, words.with_values(tf.boolean_mask(position, first)),
          words.with_values(letters.row_lengths()))


def final_spans(tokenizer: GraphTokenizer, orig_text: tf.Tensor, pred_text: tf.Tensor):
  """finetune/qa/deployed.py's final_span on string tensors [N]: [start, end) in
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
  orig_kept = tf.ragged.boolean_mask(orig.with_values(serving.row_positions(orig)),
                                     orig.with_values(~tokenizer.skipped(orig.values)))
  tok_kept = tok.with_values(~tokenizer.skipped(tok.values))
  stripped = serving.row_cumsum(tok_kept)  # a tok_text character's place without the skipped
  inside = lambda i: (i >= 0) & (i < tok_length)
  valid = (tf.less(start, tf.int32.max) & inside(start) & inside(end) &
           tf.equal(orig_kept.row_lengths(), tf.reduce_sum(tf.cast(tok_kept, tf.int64), 1)))
  valid &= serving.gather_at(tok_kept, start, valid) & serving.gather_at(tok_kept, end, valid)
  first = serving.gather_at(orig_kept, serving.gather_at(stripped, start, valid), valid)
  last = serving.gather_at(orig_kept, serving.gather_at(stripped, end, valid), valid)
  whole = tf.cast(orig.row_lengths(), tf.int64)
  return tf.where(valid, first, 0), tf.where(valid, last + 1, whole)


def window_candidates(outputs, n_best_size: int):
  """deployed.window_candidates on every window: start, end [N, C] and their
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



def qa_windows(module: serving.ServingModule, question, words, config):
  """finetune/qa/data.py's featurize: the model inputs of every window [N, L],
  its example [N], each position's context word (-1 outside the context) and whether
  the window is the piece's one with the most context [N, L]."""
  length, tokenizer = module.length, module.tokenizer
  question = tf.strings.reduce_join(tf_text.regex_split(
      question, tokenizer.split_pattern), axis=1, separator=" ")  # str.split() joined
  query = module.tokenize(question)[:, :config.max_query_length]
  pieces = module.tokenize(words.values)  # each word alone, so each piece knows its word
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
  head = serving.concat([serving.column(module.cls_id, query), query, serving.column(module.sep_id, query)])
  tail = serving.column(module.sep_id, query)
  ids = serving.concat([head, position.with_values(tf.gather(context.values, piece)), tail])
  segments = serving.concat([tf.zeros_like(head), serving.like(position, 1), serving.like(tail, 1)])
  no_word = tf.constant(-1, tf.int64)
  token_word = serving.concat([serving.like(head, no_word), position.with_values(
      tf.gather(piece_word, piece)), serving.like(tail, no_word)])
  max_context = serving.concat([serving.like(head, False), position.with_values(
      tf.equal(tf.gather(owner, piece), window)), serving.like(tail, False)])
  shape = [None, length]
  return (serving.model_inputs(ids, segments, length), example,
          token_word.to_tensor(-1, shape=shape), max_context.to_tensor(False, shape=shape))


class Spans(collections.namedtuple("Spans", [
    "window", "example", "start", "end", "start_score", "end_score", "first_word",
    "last_word"])):
  """Candidate answer spans, one per row: their window and example, their first and
  last piece in the window (start, end) with its logits, and their first and last word
  in the example's context."""


def ranked_spans(outputs, token_word, max_context, window_example,
                 config) -> Spans:
  """Every window's n-best starts and ends that make a valid span (both in the
  context's words, in their max-context window, in order, at most max_answer_length
  pieces), each example's spans best first."""
  starts, ends, start_scores, end_scores = window_candidates(outputs, config.n_best_size)
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
  window = tf.gather(window, order)
  return Spans(window, tf.gather(window_example, window),
               *[tf.gather(x, order) for x in candidates])


def span_texts(module: serving.ServingModule, words, word_offsets, word_lengths,
               input_ids, spans: Spans):
  """Each span's answer text, as get_final_text trims its words' text to its pieces',
  and a function from a character of that words' text to the context's."""
  tokenizer, vocab = module.tokenizer, tf.constant(module.vocab_tokens)
  word_base = tf.gather(words.row_starts(), spans.example)
  span_words = tf.ragged.range(word_base + spans.first_word,
                               word_base + spans.last_word + 1)
  # deployed.span_words: a space before each of the span's words but its first that
  # whitespace parts from the one before.
  offsets, lengths = word_offsets.values, word_lengths.values
  parted = tf.concat([[False], offsets[1:] > offsets[:-1] + lengths[:-1]], 0)
  spaced = span_words.with_values(tf.gather(parted, span_words.values) &
                                  (serving.row_positions(span_words) > 0))
  orig_text = tf.strings.reduce_join(span_words.with_values(tf.strings.join(
      [tf.where(spaced.values, " ", ""), tf.gather(words.values, span_words.values)])),
                                     axis=1)
  at = tf.cast(spans.window, tf.int32) * module.length
  ids = tf.gather(tf.reshape(input_ids, [-1]),
                  tf.ragged.range(at + spans.start, at + spans.end + 1))
  pred_text = tf.strings.reduce_join(tf.gather(vocab, ids), axis=1, separator=" ")
  pred_text = tf.strings.regex_replace(tf.strings.regex_replace(
      pred_text, " ##", ""), "##", "")
  pred_text = tf.strings.reduce_join(tf_text.regex_split(
      pred_text, tokenizer.split_pattern), axis=1, separator=" ")
  span_start, span_end = final_spans(tokenizer, orig_text, pred_text)
  text = tf.strings.substr(orig_text, span_start, span_end - span_start,
                           unit="UTF8_CHAR")
  # From orig_text to the context: each word's first character in orig_text.
  space = tf.cast(spaced, tf.int64)
  joined = serving.row_cumsum(tf.gather(lengths, span_words) + space) + space

  def in_context(place):
    row = joined.value_rowids()
    word = tf.math.unsorted_segment_sum(tf.cast(
        joined.values <= tf.gather(place, row), tf.int64), row, tf.size(place)) - 1
    return (tf.gather(offsets, word_base + spans.first_word + word) + place -
            serving.gather_at(joined, word, tf.ones_like(place, tf.bool)))
  return text, in_context(span_start), in_context(span_end - 1) + 1


def null_odds(outputs, config, window_example, batch, best_start_score, best_end_score):
  """Each example's no-answer score as deployed.py scores it: its windows' least null
  logit, less its best span's when the head has no answerable classifier."""
  if config.answerable_classifier:
    null = outputs["answerable_logit"]
  else:
    null = outputs["start_logits"][:, 0]
    if "end_logits" in outputs:  # the joint head scores ends only after a start
      null += outputs["end_logits"][:, 0]
  odds = tf.cast(tf.math.unsorted_segment_min(null, window_example, batch), tf.float64)
  if not config.answerable_classifier:
    odds = odds - best_start_score - best_end_score
  return odds


def qa_function(module: serving.ServingModule, runner):
  """The answer of every (question, context): deployed.predict_answers over the
  windows of finetune/qa/data.py, as runner.prediction_records reports it."""
  config, v2 = runner.settings, runner.task.v2
  spec = tf.TensorSpec([None], tf.string)

  @tf.function(input_signature=[spec, spec], autograph=False)
  def answer(question, context):
    batch = tf.size(context, out_type=tf.int64)
    words, word_offsets, word_lengths = split_context(context)
    inputs, window_example, token_word, max_context = qa_windows(
        module, question, words, config)
    outputs = module.head(runner, inputs)
    spans = ranked_spans(outputs, token_word, max_context, window_example, config)
    text, start, end = span_texts(module, words, word_offsets, word_lengths,
                                  inputs["input_ids"], spans)
    example = spans.example
    # The n-best list: the first n_best_size distinct texts of each example.
    total = tf.cast(spans.start_score, tf.float64) + tf.cast(spans.end_score, tf.float64)
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
              "start": pick(start, tf.constant(-1, tf.int64)),
              "end": pick(end, tf.constant(-1, tf.int64)),
              "probability": tf.cast(pick(probability, tf.constant(1.0, tf.float64)),
                                     tf.float32)}
    if v2:
      zero = tf.constant(0.0, tf.float64)
      odds = null_odds(outputs, config, window_example, batch,
                       pick(tf.cast(spans.start_score, tf.float64), zero),
                       pick(tf.cast(spans.end_score, tf.float64), zero))
      result.update(no_answer_score=tf.cast(odds, tf.float32),
                    no_answer=odds > config.qa_na_threshold)
    return result
  return answer


# The deploy.json fields of the run's QA settings the reader reads.
_READER_SETTINGS = ("max_query_length", "doc_stride", "n_best_size", "max_answer_length",
                    "answerable_classifier", "qa_na_threshold")

# The exported model's outputs are the head's inference outputs, as
# deployed.predict_answers reads them.
SERVING = serving.Serving(
    qa_function, reader="finetune.qa.deployed",
    info=lambda runner: {"v2": runner.task.v2, **{
        name: getattr(runner.settings, name) for name in _READER_SETTINGS}},
    float_head=True, fixed_length=True)
