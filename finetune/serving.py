"""The serving export: a SavedModel that takes raw UTF-8 strings, tokenizer inside.

Every fine-tuning run writes <model_dir>_<trial>/saved_model/; what each family's
`serving_default` signature takes and returns: docs/deploying.md, "Serving SavedModel".
Loading needs tensorflow and tensorflow_text only: the model's variables are saved, not
the Keras objects. Here: a family's serving declaration (`Serving`), the module of the
variables, the tokenizer and one function per task, and the ragged-tensor steps the
families' functions (their serving.py) share.
"""

import dataclasses
from typing import Callable, Dict, Tuple

import tensorflow as tf

from finetune import padding
from finetune.graph_tokenizer import GraphTokenizer
from finetune.runner import scope_name
from runs.model_files import SAVED_MODEL  # pylint: disable=unused-import


@dataclasses.dataclass(frozen=True)
class Serving:
  """A family's serving: the SavedModel's function and, for the token-ids files of
  export/ (LiteRT, ONNX), their inputs and outputs and the numpy reader shipped beside
  them. The callables take the task's runner (its task, settings and tokenizer)."""
  # (ServingModule, runner) -> the task's tf.function: raw strings in, --predict's
  # outputs out (QA's: its windows' head outputs, which the reader answers from).
  function: Callable
  # The module (dotted path) whose Reader(info, tokenizer) turns texts into the model's
  # inputs and its outputs into --predict's records; it and the project modules it
  # imports are shipped (numpy only). "": the family's models are not exported as files.
  reader: str = ""
  # The exported model's inputs, each int32 [B, L]: L the batch's longest example, or
  # max_seq_length where `fixed_length` (export/registry.py Job.model_function); the
  # runner's features hold them.
  inputs: Tuple[str, ...] = padding.TOKEN_FEATURES
  # (runner, head outputs) -> the exported model's outputs (named tensors).
  outputs: Callable[[object, object], Dict[str, tf.Tensor]] = lambda runner, out: dict(out)
  # runner -> the deploy.json fields its reader reads besides the shared ones.
  info: Callable[[object], Dict[str, object]] = lambda runner: {}
  # True when the head stays float32 in the full-int8 model: its outputs span a range
  # that int8 cannot hold (QA's -1000 on the positions outside the context: calibrated
  # to int8, every real logit became one value and no int8 answer was --predict's).
  float_head: bool = False
  # True when the files keep max_seq_length: QA's joint head, at a free length, converts
  # to a strided slice (a new axis over a free one) LiteRT has no builtin kernel for.
  fixed_length: bool = False


def model_inputs(ids: tf.RaggedTensor, segments: tf.RaggedTensor, length=None):
  """The model's inputs padded to `length`, or to the batch's longest row when None (the
  model computes on the tokens that exist; the rows are already cut to fit)."""
  shape = [None, length]
  return {"input_ids": ids.to_tensor(0, shape=shape),
          "input_mask": tf.ones_like(ids).to_tensor(0, shape=shape),
          "segment_ids": tf.cast(segments, tf.int32).to_tensor(0, shape=shape)}


def row_positions(ragged: tf.RaggedTensor) -> tf.Tensor:
  """Each value's position in its row (flat, int64)."""
  return tf.range(tf.size(ragged.values, out_type=tf.int64)) - tf.gather(
      ragged.row_starts(), ragged.value_rowids())


def row_cumsum(ragged: tf.RaggedTensor) -> tf.RaggedTensor:
  """The exclusive cumulative sum of each row (int64)."""
  total = tf.cumsum(tf.cast(ragged.values, tf.int64), exclusive=True)
  return ragged.with_values(total - tf.gather(total, tf.gather(ragged.row_starts(),
                                                               ragged.value_rowids())))


def doc_windows(context: tf.RaggedTensor, room, stride):
  """finetune/windows.py's doc_spans of every row of `context` (pieces [B, None]) in
  closed form: windows every `stride` pieces, at most `room` long (each [B], or one for
  all rows), until the end. Returns the windows [B, (count)], each one's first piece
  and length [N], and its pieces [N, (length)]."""
  n = context.row_lengths()
  room, stride = (tf.broadcast_to(tf.cast(x, tf.int64), tf.shape(n)) for x in (room, stride))
  count = tf.where(n > room, (n - room + stride - 1) // stride + 1, tf.ones_like(n))
  windows = tf.ragged.range(count)
  row = windows.value_rowids()
  first = windows.values * tf.gather(stride, row)
  span = tf.minimum(tf.gather(n, row) - first, tf.gather(room, row))
  position = tf.ragged.range(first, first + span)
  piece = position.values + tf.gather(context.row_starts(),
                                      tf.gather(row, position.value_rowids()))
  return windows, first, span, position.with_values(tf.gather(context.values, piece))


class ServingModule(tf.Module):
  """The model's variables, the tokenizer and one prediction function per task (each
  runner's serving.function builds its task's from this module's parts)."""

  def __init__(self, model, runners, vocab, normalization, max_seq_length: int):
    super().__init__(name="serving")
    self.tokenizer = GraphTokenizer(vocab.tokens, *normalization)
    self.model_variables = list(model.variables)
    self.length = max_seq_length
    self.cls_id, self.sep_id, self.unk_id = vocab.cls_id, vocab.sep_id, vocab.unk_id

    # The tokenizer and the encoder are traced once, as functions of their own that every
    # task's signature calls: tracing their ragged and Keras graphs again in each
    # signature took most of an export's time (bench/RESULTS.md,
    # "Figures moved from code comments").
    strings = tf.TensorSpec([None], tf.string)
    ids = tf.TensorSpec([None, None], tf.int32)
    self.tokenize = tf.function(self.tokenizer, input_signature=[strings],
                                autograph=False)
    encode = tf.function(lambda input_ids, input_mask, segment_ids: model.encoder(
        {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids},
        training=False), input_signature=[ids] * 3, autograph=False)

    def head(runner, batch):  # a closure: the Keras objects themselves are not saved
      hidden = encode(batch["input_ids"], batch["input_mask"], batch["segment_ids"])
      return model.heads[runner.head_name](hidden, batch, training=False)
    self.head = head
    functions = {}
    for runner in runners:
      function = runner.serving.function(self, runner)
      functions[scope_name(runner.task.name)] = function
      functions.setdefault("serving_default", function)
    self.functions = functions


def export(model, runners, vocab, normalization, max_seq_length: int, folder: str):
  """Writes the SavedModel into `folder`, a new one its writer puts in place whole
  (runs/model_files.py's, export/folder.py's). `normalization`: the text's
  (data_prep/normalization.py), which the graph applies."""
  module = ServingModule(model, runners, vocab, normalization, max_seq_length)
  tf.saved_model.save(module, folder, signatures=module.functions)
