"""A QA task's serving function (finetune/serving.py): questions and contexts in, the
head's outputs on every window of finetune/qa/data.py out, as the token-ids files give
them; the reader (deployed.py) extracts the answers from them, for every form alike."""

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from data_prep.reference_tokenizer import CJK_RANGES
from finetune import serving
from finetune.qa.data import WORD_SEPARATORS as SEPARATORS

WORD_SEPARATORS = np.array([ord(c) for c in SEPARATORS], np.int32)
CJK_FIRST, CJK_LAST = np.array(CJK_RANGES, np.int32).T


def split_context(context: tf.Tensor) -> tf.RaggedTensor:
  """finetune/qa/data.py's split_words on a string tensor [B]: the words [B, W]."""
  chars = tf.strings.unicode_decode(context, "UTF-8", errors="replace",
                                    replacement_char=0xFFFD)
  cps = chars.values
  space = tf.reduce_any(tf.equal(cps[:, None], WORD_SEPARATORS), -1)
  cjk = tf.reduce_any((cps[:, None] >= CJK_FIRST) & (cps[:, None] <= CJK_LAST), -1)
  # A word starts after a separator or a CJK character, and at each CJK character.
  first = ~space & (tf.concat([[True], space | cjk], 0)[:-1] | cjk |
                    tf.equal(serving.row_positions(chars), 0))
  word_of_char = tf.cumsum(tf.cast(first, tf.int64)) - 1
  letters = tf.RaggedTensor.from_value_rowids(
      tf.boolean_mask(cps, ~space), tf.boolean_mask(word_of_char, ~space),
      nrows=tf.reduce_sum(tf.cast(first, tf.int64)))
  return tf.RaggedTensor.from_value_rowids(tf.strings.unicode_encode(letters, "UTF-8"),
                                           tf.boolean_mask(chars.value_rowids(), first),
                                           nrows=chars.nrows())


def qa_function(module: serving.ServingModule, runner):
  """question [B], context [B] -> the head's outputs on every window [N, ...] (those of
  the token-ids files) and window_question [N], the question each window is of. The
  windows are finetune/qa/data.py featurize's."""
  spec, length, config = tf.TensorSpec([None], tf.string), module.length, runner.settings

  @tf.function(input_signature=[spec, spec], autograph=False)
  def answer_windows(question, context):
    question = tf.strings.reduce_join(tf_text.regex_split(
        question, module.tokenizer.split_pattern), axis=1, separator=" ")  # str.split()
    query = module.tokenize(question)[:, :config.max_query_length]
    words = split_context(context)  # each word tokenized alone, as featurize's
    pieces = tf.RaggedTensor.from_row_splits(module.tokenize(words.values),
                                             words.row_splits).merge_dims(1, 2)
    room = length - 3 - query.row_lengths()
    with tf.control_dependencies([tf.debugging.assert_positive(room, message=(
        f"question pieces leave no room for the context in max_seq_length {length}; "
        f"the model was exported with max_query_length {config.max_query_length}"))]):
      windows, _, _, pieces = serving.doc_windows(pieces, room,
                                                  tf.minimum(room, config.doc_stride))
    example = windows.value_rowids()
    ids, segments = tf_text.combine_segments([tf.gather(query, example), pieces],
                                             module.cls_id, module.sep_id)
    inputs = serving.model_inputs(ids, segments, length)
    return {**module.head(runner, inputs), "window_question": example}
  return answer_windows


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
