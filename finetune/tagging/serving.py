"""A tagging task's serving function (finetune/serving.py): sentences in, a tag per
word out, as --predict."""

import tensorflow as tf
import tensorflow_text as tf_text

from finetune import padding, serving
from finetune.tagging import data as tagging_data


def tagging_function(module: serving.ServingModule, runner):
  """text [B] (words split at whitespace) -> tag [B, W] and tag_id [B, W]."""
  length = module.length
  tags = tf.constant(tagging_data.to_bio(runner.labels))

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
  def tag(text):
    words = tf_text.regex_split(text, module.tokenizer.split_pattern)
    pieces = module.tokenize(words.flat_values)
    # A word BERT's cleaning empties still gets a slot: [UNK], as in --predict.
    empty = tf.equal(pieces.row_lengths(), 0)
    pieces = tf.ragged.boolean_mask(
        serving.concat([pieces, serving.column(module.unk_id, pieces)]),
        serving.concat([tf.ones_like(pieces, tf.bool), tf.RaggedTensor.from_tensor(
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
    ids = serving.concat([serving.column(module.cls_id, word_pieces), word_pieces,
                   serving.column(module.sep_id, word_pieces)])
    batch = serving.model_inputs(ids, tf.ones_like(ids))
    batch["word_positions"] = positions.to_tensor(0)
    best = tf.argmax(module.head(runner, batch), -1, output_type=tf.int32)
    # Words past max_seq_length are O (label 0); -1 and "" pad past a sentence's end.
    in_model = positions.row_lengths()
    cut = words.row_lengths() - in_model
    width = tf.maximum(tf.reduce_max(cut), 0)
    tag_id = serving.concat([tf.RaggedTensor.from_tensor(best, lengths=in_model),
                      tf.RaggedTensor.from_tensor(tf.zeros([words.nrows(), width],
                                                           tf.int32), lengths=cut)])
    return {"tag_id": tag_id.to_tensor(-1),
            "tag": tf.gather(tags, tag_id).to_tensor("")}
  return tag


SERVING = serving.Serving(
    tagging_function, reader="finetune.tagging.deployed",
    inputs=padding.TOKEN_FEATURES + ("word_positions",),
    outputs=lambda runner, out: {"logits": out},
    info=lambda runner: {"labels": list(runner.labels)})
