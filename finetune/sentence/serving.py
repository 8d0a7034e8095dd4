"""A sentence task's serving function (finetune/serving.py): raw strings in, the
predictions of --predict out."""

import tensorflow as tf
import tensorflow_text as tf_text

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

  def encode(*pieces):
    # RoundRobinTrimmer is the original's truncation (the longer loses pieces, B on a
    # tie): 0 of 900 length pairs differ, at 5 budgets.
    trimmed = tf_text.RoundRobinTrimmer(length - 1 - len(pieces)).trim(pieces)
    return serving.model_inputs(*tf_text.combine_segments(trimmed, module.cls_id,
                                                          module.sep_id))

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
