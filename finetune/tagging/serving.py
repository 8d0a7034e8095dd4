"""A tagging task's serving function (finetune/serving.py): sentences in, a tag per
word out, as --predict: a long sentence in windows, each word tagged from its window of
most context (data.py windows, computed in the graph)."""

import tensorflow as tf
import tensorflow_text as tf_text

from finetune import padding, serving


def tagging_function(module: serving.ServingModule, runner):
  """text [B] (words split at whitespace) -> tag [B, W] and tag_id [B, W]."""
  room = module.length - 2
  stride = min(room, runner.stride)
  tags = tf.constant(runner.task.output_tags)

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
  def tag(text):
    words = tf_text.regex_split(text, module.tokenizer.split_pattern)
    pieces = module.tokenize(words.flat_values)
    # A word BERT's cleaning empties still gets a slot: [UNK], as in --predict.
    empty = tf.equal(pieces.row_lengths(), 0)
    unk = tf.fill([pieces.nrows(), 1], module.unk_id)
    pieces = tf.concat([pieces, tf.ragged.boolean_mask(unk, empty[:, None])], axis=1)
    context = tf.RaggedTensor.from_row_splits(pieces, words.row_splits).merge_dims(1, 2)
    windows, first, span, window_pieces = serving.doc_windows(context, room, stride)
    ids, _ = tf_text.combine_segments([window_pieces], module.cls_id, module.sep_id)
    # Each word's first piece p in its sentence, and the windows that hold it: from
    # ceil((p - room + 1) / stride) to p // stride (the last the sentence has).
    p = serving.row_cumsum(words.with_values(pieces.row_lengths())).values
    sentence_of_word = words.value_rowids()
    last = tf.gather(windows.row_lengths(), sentence_of_word) - 1
    held = tf.ragged.range(tf.maximum(-((room - 1 - p) // stride), 0),
                           tf.minimum(last, p // stride) + 1)
    word = held.value_rowids()  # [E] a word (flat) and one of its windows
    window = tf.gather(windows.row_starts(), tf.gather(sentence_of_word, word)) + held.values
    start, length, at = tf.gather(first, window), tf.gather(span, window), tf.gather(p, word)
    # max_context_owner: the best score's first window.
    score = (tf.cast(tf.minimum(at - start, start + length - 1 - at), tf.float64) +
             0.01 * tf.cast(length, tf.float64))
    total = tf.size(p, out_type=tf.int64)
    best = tf.gather(tf.math.unsorted_segment_max(score, word, total), word)
    entry = tf.range(tf.size(word, out_type=tf.int64))
    owner = tf.math.unsorted_segment_min(tf.where(tf.equal(score, best), entry,
                                                  tf.int64.max), word, total)
    # A window's words are consecutive: a word's slot is its place after the first.
    index = tf.gather(serving.row_positions(words), word)
    rows = tf.size(first, out_type=tf.int64)
    slot = index - tf.gather(tf.math.unsorted_segment_min(index, window, rows), window)
    places = tf.stack([window, slot], 1)
    width = tf.maximum(tf.reduce_max(slot) + 1, 0)
    batch = serving.model_inputs(ids, tf.ones_like(ids))
    batch["word_positions"] = tf.cast(tf.scatter_nd(places, 1 + at - start,
                                                    tf.stack([rows, width])), tf.int32)
    best_label = tf.argmax(module.head(runner, batch), -1, output_type=tf.int32)
    tag_id = words.with_values(tf.gather_nd(best_label, tf.gather(places, owner)))
    # -1 and "" pad past a sentence's end.
    return {"tag_id": tag_id.to_tensor(-1), "tag": tf.gather(tags, tag_id).to_tensor("")}
  return tag


SERVING = serving.Serving(
    tagging_function, reader="finetune.tagging.deployed",
    inputs=padding.TOKEN_FEATURES + ("word_positions",),
    outputs=lambda runner, out: {"logits": out},
    info=lambda runner: {"labels": list(runner.labels),
                         "output_tags": list(runner.task.output_tags),
                         "entities": runner.task.scheme != "none",
                         "tagging_stride": runner.stride})
