"""The fine-tuning model of extractive QA tasks (SQuAD 1.1/2.0, MRQA): the original's
span-prediction head, its loss, and the runner that trains and scores it.

Start logits come from one dense unit per piece. With joint prediction (the default;
else the two are independent) the end is predicted given the start: a 512-unit GELU
layer reads [start piece; end piece] for every end, then one unit scores it; training
conditions on the gold start, inference gives each of the beam_size likeliest starts
its beam_size likeliest ends. The layer is applied as start @ W[:H] + end @ W[H:] + b:
the original's dense layer on the concatenation, without the [B, beam, L, 2H] tensor of
every pair. Spans may only touch context pieces or [CLS] (the "no answer" position);
others get -1000. The answerability classifier (SQuAD 2.0) reads the [CLS] vector and,
optionally, the piece vectors averaged under the start distribution, through a 512-unit
GELU layer; its sigmoid loss is weighted answerable_weight.

Scoring a split writes, as the original does, <results_dir>/<tasks>_qa/<task>_<split>_
preds.json (question id -> answer; SQuAD 2.0's best non-null one), _nbest.json,
_eval.json (every official metric) and, for SQuAD 2.0, _null_odds.json and
_preds_thresholded.json ("" where the null odds exceed the split's best-F1 threshold).
exact_match and f1 use qa_na_threshold, as the original's evaluation; best_exact_match
and best_f1 the split's best threshold, as the paper reports SQuAD 2.0.
"""

import json
import logging
import os

import tensorflow as tf
import tf_keras

from finetune import padding
from finetune.errors import DataError
from finetune.qa import data as qa_data
from finetune.qa import deployed as qa_deployed
from finetune.qa import serving as qa_serving
from finetune.qa import squad_metrics
from finetune.runner import PREDICT_SPLIT, TaskRunner
from util.files import atomic_write

HIDDEN_UNITS = 512  # the original's qa_hidden and answerable layers
OFF_SPAN = -1000.0  # added to the logits of positions a span may not touch


def _gelu(x):
  return tf_keras.activations.gelu(x)  # exact erf form, as the original's modeling.gelu


class SpanHead(tf_keras.layers.Layer):
  """head(sequence_output, batch, training) -> dict of float32 logits (see module doc).

  Training: start_logits, end_logits [B, L] (the end given the gold start when joint),
  answerable_logit [B]. Inference, joint: start_logits [B, L], start_top_log_probs and
  start_top_index [B, beam], end_top_log_probs and end_top_index [B, beam, beam];
  independent: start_logits, end_logits. answerable_logit when the classifier is on.
  """

  def __init__(self, joint_prediction: bool = True, beam_size: int = 20,
               answerable_classifier: bool = True,
               answerable_uses_start_logits: bool = True, **kwargs):
    super().__init__(**kwargs)
    self.joint_prediction, self.beam_size = joint_prediction, beam_size
    self.answerable_classifier = answerable_classifier
    self.answerable_uses_start_logits = answerable_uses_start_logits
    self.start_dense = tf_keras.layers.Dense(1, name="start_logits")
    self.end_dense = tf_keras.layers.Dense(
        1, name="qa_logits" if joint_prediction else "end_logits")
    if answerable_classifier:
      if answerable_uses_start_logits:
        self.answerable_hidden = tf_keras.layers.Dense(HIDDEN_UNITS, activation=_gelu,
                                                       name="answerable_hidden")
      self.answerable_dense = tf_keras.layers.Dense(1, name="answerable_logit")

  def build(self, input_shape):
    if self.joint_prediction:
      hidden = int(input_shape[-1])
      self.end_hidden_kernel = self.add_weight(
          "qa_hidden/kernel", [2 * hidden, HIDDEN_UNITS],
          initializer=tf_keras.initializers.GlorotUniform())
      self.end_hidden_bias = self.add_weight("qa_hidden/bias", [HIDDEN_UNITS],
                                             initializer="zeros")
    super().build(input_shape)

  def _end_logits(self, sequence, start_vectors, penalty):
    """[B, K, L] end logits of K start vectors [B, K, H]."""
    hidden = sequence.shape[-1]
    kernel = tf.cast(self.end_hidden_kernel, sequence.dtype)
    from_start = tf.einsum("bkh,hu->bku", start_vectors, kernel[:hidden])
    from_end = tf.einsum("blh,hu->blu", sequence, kernel[hidden:]) + tf.cast(
        self.end_hidden_bias, sequence.dtype)
    pairs = _gelu(from_start[:, :, None, :] + from_end[:, None, :, :])
    logits = tf.cast(tf.squeeze(self.end_dense(pairs), -1), tf.float32)
    return logits + penalty[:, None, :]

  def call(self, sequence_output, batch, training=None):
    length = tf.shape(sequence_output)[1]
    allowed = tf.cast(batch["input_mask"] * batch["segment_ids"], tf.float32)
    allowed = tf.maximum(allowed, tf.one_hot(0, length))  # [CLS]: "no answer"
    penalty = -OFF_SPAN * (allowed - 1.0)
    start_logits = tf.cast(tf.squeeze(self.start_dense(sequence_output), -1),
                           tf.float32) + penalty
    outputs = {"start_logits": start_logits}
    if not self.joint_prediction:
      outputs["end_logits"] = tf.cast(tf.squeeze(self.end_dense(sequence_output), -1),
                                      tf.float32) + penalty
    elif training:
      gold_start = tf.gather(sequence_output, batch["start_positions"], batch_dims=1)
      outputs["end_logits"] = self._end_logits(sequence_output, gold_start[:, None],
                                               penalty)[:, 0]
    else:
      start_log_probs = tf.nn.log_softmax(start_logits)
      top_log_probs, top_index = tf.math.top_k(start_log_probs, k=self.beam_size)
      starts = tf.gather(sequence_output, top_index, batch_dims=1)
      end_log_probs = tf.nn.log_softmax(self._end_logits(sequence_output, starts,
                                                         penalty))
      end_top_log_probs, end_top_index = tf.math.top_k(end_log_probs, k=self.beam_size)
      outputs.update(start_top_log_probs=top_log_probs, start_top_index=top_index,
                     end_top_log_probs=end_top_log_probs, end_top_index=end_top_index)
    if self.answerable_classifier:
      features = sequence_output[:, 0]
      if self.answerable_uses_start_logits:
        start_probs = tf.cast(tf.nn.softmax(start_logits), sequence_output.dtype)
        expected_start = tf.einsum("bl,blh->bh", start_probs, sequence_output)
        features = self.answerable_hidden(tf.concat([features, expected_start], -1))
      outputs["answerable_logit"] = tf.cast(
          tf.squeeze(self.answerable_dense(features), -1), tf.float32)
    return outputs


def span_loss(outputs, batch, answerable_weight: float) -> tf.Tensor:
  """Per-window float32 loss: mean of start and end cross-entropies (+ answerability)."""
  start = tf.nn.sparse_softmax_cross_entropy_with_logits(batch["start_positions"],
                                                         outputs["start_logits"])
  end = tf.nn.sparse_softmax_cross_entropy_with_logits(batch["end_positions"],
                                                       outputs["end_logits"])
  loss = (start + end) / 2.0
  if "answerable_logit" in outputs:
    loss += answerable_weight * tf.nn.sigmoid_cross_entropy_with_logits(
        labels=tf.cast(batch["is_impossible"], tf.float32),
        logits=outputs["answerable_logit"])
  return loss


class QARunner(TaskRunner):
  """Span extraction: windows of one question and part of its context."""

  serving = qa_serving.SERVING

  def __init__(self, task, config, tokenizer):
    super().__init__(task, config, tokenizer)
    self._windows = {}  # split -> Windows of its last featurization (not training's)

  @property
  def settings(self):
    """The run's question-answering section (finetune/qa/family.py QASettings)."""
    return self.config.sections["qa"]

  def prepare_examples(self, examples, split):
    if split != self.task.train_split:
      return examples  # scores read every gold answer's text, found at its offset or not
    # Like the original, training leaves out answerable questions with no answer found.
    kept = [e for e in examples if e.is_impossible or e.answers]
    unmatched = [where for e in examples for where in e.unmatched]
    if len(kept) < len(examples) and not any(e.answers for e in kept):
      # Else the run ends in "0 training features", far from the cause.
      raise DataError(
          f"{self.task.name} {split}: none of its {len(examples) - len(kept)} answerable "
          "questions has a gold answer whose text is in the context at its answer_start "
          f"(first: {unmatched[0]}); answer_start must be the answer's first character "
          "in the context, counted from 0")
    if unmatched:
      logging.warning("%s %s: %d gold answers are not at their answer_start (first: %s); "
                      "%d questions left without one are left out of training",
                      self.task.name, split, len(unmatched), unmatched[0],
                      len(examples) - len(kept))
    return kept

  def _featurize(self, examples):
    c = self.settings
    return qa_data.featurize(self.tokenizer, examples, self.config.max_seq_length,
                                 c.max_query_length, c.doc_stride)

  def features(self, examples, split):
    windows = self._featurize(examples)
    if split != self.task.train_split:  # only scored splits need the maps (memory)
      self._windows[split] = windows
    return dict(windows.arrays)

  def windows(self, examples, features, split) -> qa_data.Windows:
    """The bookkeeping of the split's features, featurized again if not kept."""
    windows = self._windows.get(split)
    if windows is None or windows.arrays["input_ids"] is not features["input_ids"]:
      windows = self._featurize(examples)
    return windows

  def make_head(self, model_config):
    c, length = self.settings, self.config.max_seq_length
    if c.joint_prediction and not 1 <= c.beam_size <= length:
      raise ValueError(f"beam_size {c.beam_size} must be between 1 and max_seq_length "
                       f"{length}")
    return SpanHead(
        c.joint_prediction, c.beam_size, c.answerable_classifier,
        c.answerable_uses_start_logits, name=self.head_layer_name)

  @property
  def shortest_batch(self) -> int:
    """The joint head takes the beam_size best starts of a window's positions."""
    c = self.settings
    return c.beam_size if c.joint_prediction else 1

  def padded_outputs(self, outputs, max_length):
    # Cut positions are padding, off every span: they get the head's off-span logit.
    # The top indexes and beams index positions that hold tokens, as in a padded batch.
    return {name: padding.pad_tokens(value, max_length, OFF_SPAN)
            if name in ("start_logits", "end_logits") else value
            for name, value in outputs.items()}

  def loss(self, outputs, batch):
    return span_loss(outputs, batch, self.settings.answerable_weight)

  def predict_answers(self, examples, features, outputs, split):
    c = self.settings
    return qa_deployed.predict_answers(
        examples, self.windows(examples, features, split), outputs,
        self.tokenizer.vocab.tokens, n_best_size=c.n_best_size,
        max_answer_length=c.max_answer_length, v2=self.task.v2,
        answerable_classifier=c.answerable_classifier,
        lower_case=self.tokenizer.lower_case, accents=self.tokenizer.accents)

  def read_unlabeled(self, path):
    return qa_data.read_questions(path)

  def prediction_records(self, examples, features, outputs):
    predictions = self.predict_answers(examples, features, outputs, PREDICT_SPLIT)
    return qa_deployed.prediction_records(examples, predictions, self.task.v2,
                                             self.settings.qa_na_threshold)

  def output_file(self, split: str, kind: str) -> str:
    return os.path.join(self.config.results_dir, f"{self.config.tasks_label}_qa",
                        f"{self.task.name.replace('/', '_')}_{split}_{kind}.json")

  @staticmethod
  def _write(path: str, value) -> str:
    with atomic_write(path) as f:
      json.dump(value, f, indent=2)
    return path

  def write_predictions(self, examples, features, outputs, split, out_dir):
    """Test-set answers as the original submits them (SQuAD 2.0's test.json, as
    <task>_<split>_preds.json): "" where the null odds exceed qa_na_threshold (no labels
    to tune it on)."""
    predictions = self.predict_answers(examples, features, outputs, split)
    answers = (qa_deployed.thresholded(predictions, self.settings.qa_na_threshold)
               if self.task.v2 else predictions.answers)
    name = f"{self.task.name.replace('/', '_')}_{split}_preds.json"
    return [self._write(os.path.join(out_dir, name), answers)]

  def score(self, examples, features, outputs, split):
    predictions = self.predict_answers(examples, features, outputs, split)
    dataset = squad_metrics.gold_dataset(examples)
    self._write(self.output_file(split, "preds"), predictions.answers)
    self._write(self.output_file(split, "nbest"), predictions.nbest)
    if self.task.v2:
      result = squad_metrics.evaluate_v2(dataset, predictions.answers,
                                         predictions.null_odds,
                                         self.settings.qa_na_threshold)
      self._write(self.output_file(split, "null_odds"), predictions.null_odds)
      self._write(self.output_file(split, "preds_thresholded"),
                  qa_deployed.thresholded(predictions, result["best_f1_thresh"]))
    else:
      result = squad_metrics.evaluate_v1(dataset, predictions.answers)
    self._write(self.output_file(split, "eval"), result)
    return squad_metrics.headline(result, self.task.v2)
