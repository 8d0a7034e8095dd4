"""The original's span-prediction head for extractive QA, and its loss.

Start logits come from one dense unit per piece. With joint prediction (the default) the
end is predicted given the start: a 512-unit GELU layer reads [start piece; end piece]
for every end, then one unit scores it. Training conditions on the gold start; at
inference the beam_size most likely starts each get their beam_size most likely ends.
Otherwise (joint_prediction false) start and end logits are independent. Spans may only
touch context pieces or [CLS] (the "no answer" position); others get -1000.

The answerability classifier (SQuAD 2.0) reads the [CLS] vector and, optionally, the
piece vectors averaged under the start distribution, through a 512-unit GELU layer;
its sigmoid loss is weighted answerable_weight. Logits and losses are float32 under
mixed precision.

The layer [start; end] -> 512 is applied as start @ W[:H] + end @ W[H:] + b, which equals
the original's dense layer on the concatenation without building the [B, beam, L, 2H]
tensor of every pair.
"""

import tensorflow as tf
import tf_keras

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
    """[B, K, L] end logits for K start vectors [B, K, H] per example."""
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

  def get_config(self):
    return {**super().get_config(), "joint_prediction": self.joint_prediction,
            "beam_size": self.beam_size,
            "answerable_classifier": self.answerable_classifier,
            "answerable_uses_start_logits": self.answerable_uses_start_logits}


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
