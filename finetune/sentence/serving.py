"""A sentence task's serving function (finetune/serving.py): raw strings in, the
predictions of --predict out."""

import tensorflow as tf

from finetune import serving
from finetune.sentence.data import unlabeled_layout


def numeric_outputs(task, out):
  """The head's outputs as every export gives them: score [B] (regression), else
  probabilities [B, C] and label_id [B] (export/'s files have no strings)."""
  if task.is_regression:
    return {"score": out}
  return {"probabilities": tf.nn.softmax(out), "label_id": tf.argmax(out, -1)}


def sentence_function(module: serving.ServingModule, runner):
  """text_a [B] (and text_b [B] of a pair task) -> probabilities, label_id, label; a
  regression task's -> score. The pieces cut as the original's truncation does."""
  pair = unlabeled_layout(runner.task)[1].text_b is not None
  task, length = runner.task, module.length
  labels = tf.constant(task.labels or [""])
  spec = tf.TensorSpec([None], tf.string)

  def outputs(batch):
    out = numeric_outputs(task, module.head(runner, batch))
    if not task.is_regression:
      out["label"] = tf.gather(labels, out["label_id"])
    return out

  def encode(a, b=None):
    cls, sep = serving.column(module.cls_id, a), serving.column(module.sep_id, a)
    if b is None:
      a = a[:, :length - 2]
      ids = serving.concat([cls, a, sep])
      return serving.model_inputs(ids, tf.zeros_like(ids))
    # The original's truncation in closed form: the longer loses pieces, B on a tie.
    budget = tf.constant(length - 3, tf.int64)
    len_a, len_b = a.row_lengths(), b.row_lengths()
    keep_b = tf.minimum(len_b, tf.maximum(budget // 2, budget - len_a))
    a = serving.keep_first(a, tf.minimum(len_a, budget - keep_b))
    b = serving.keep_first(b, keep_b)
    first = serving.concat([cls, a, sep])
    second = serving.concat([b, serving.column(module.sep_id, b)])
    return serving.model_inputs(serving.concat([first, second]),
                                serving.concat([tf.zeros_like(first), tf.ones_like(second)]))

  if pair:
    return tf.function(lambda text_a, text_b: outputs(encode(
        module.tokenize(text_a), module.tokenize(text_b))), input_signature=[spec, spec],
        autograph=False)
  return tf.function(lambda text_a: outputs(encode(module.tokenize(text_a))),
                     input_signature=[spec], autograph=False)


SERVING = serving.Serving(
    sentence_function, reader="finetune.sentence.deployed",
    outputs=lambda runner, out: numeric_outputs(runner.task, out),
    info=lambda runner: {"labels": list(runner.task.labels or []),
                         "regression": runner.task.is_regression,
                         "pair": unlabeled_layout(runner.task)[1].text_b is not None})
