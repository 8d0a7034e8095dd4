"""The fine-tuning runner of extractive QA tasks (SQuAD 1.1/2.0, MRQA).

Windows come from finetune/qa/features.py, the head and loss from finetune/qa/head.py,
answers from finetune/qa/postprocess.py. Scoring a split writes, as the original does,
<results_dir>/<tasks>_qa/<task>_<split>_preds.json (question id -> answer; for SQuAD
2.0 the best non-null answer), _nbest.json, _eval.json (every official metric) and,
for SQuAD 2.0, _null_odds.json and _preds_thresholded.json (answers with "" where the
null odds exceed the best-F1 threshold found on this split). exact_match and f1 use
qa_na_threshold, as the original's evaluation; best_exact_match and best_f1 the
threshold tuned on the split, as the paper reports SQuAD 2.0. With write_test_outputs,
SQuAD 2.0's test split (test.json, which the original also reads) gets its answers in
<results_dir>/test_predictions/<tasks>_trial<n>/squad_v2.0_test_preds.json.
"""

import json
import logging
import os

from finetune.qa import data as qa_data
from finetune.qa import features as qa_features
from finetune.qa import head as qa_head
from finetune.qa import postprocess as qa_postprocess
from finetune.qa import serving as qa_serving
from finetune.qa import squad_metrics
from finetune import padding
from finetune.errors import DataError
from finetune.runner import PREDICT_SPLIT, TaskRunner
from util.files import atomic_write


class QARunner(TaskRunner):
  """Span extraction: windows of one question and part of its context."""

  serving = qa_serving.SERVING

  def __init__(self, task, config, tokenizer):
    super().__init__(task, config, tokenizer)
    self._windows = {}  # split -> Windows of its last featurization (not training's)

  @property
  def settings(self):
    """The run's question-answering section (finetune/qa/family.py QASettings)."""
    return self.config.section("qa")

  def prepare_examples(self, examples, split):
    if split != self.task.train_split:
      return examples
    # Like the original, training leaves out answerable questions with no answer found.
    kept = [e for e in examples if e.is_impossible or e.answers]
    dropped = [e for e in examples if not (e.is_impossible or e.answers)]
    if dropped and not any(e.answers for e in kept):
      # Else the run ends in "0 training features", far from the cause.
      raise DataError(
          f"{self.task.name} {split}: none of its {len(dropped)} answerable questions "
          "has a gold answer whose text is in the context at its answer_start (first: "
          f"question {dropped[0].qid}, answer {dropped[0].gold_texts[0]!r}); "
          "answer_start must be the answer's first character in the context, counted "
          "from 0")
    if dropped:
      logging.warning("%s %s: %d questions have no gold answer at its offset and are "
                      "left out of training", self.task.name, split,
                      len(dropped))
    return kept

  def _featurize(self, examples):
    c = self.settings
    return qa_features.featurize(self.tokenizer, examples, self.config.max_seq_length,
                                 c.max_query_length, c.doc_stride)

  def features(self, examples, split):
    windows = self._featurize(examples)
    if split != self.task.train_split:  # only scored splits need the maps (memory)
      self._windows[split] = windows
    return dict(windows.arrays)

  def windows(self, examples, features, split) -> qa_features.Windows:
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
    return qa_head.SpanHead(
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
    return {name: padding.pad_tokens(value, max_length, qa_head.OFF_SPAN)
            if name in ("start_logits", "end_logits") else value
            for name, value in outputs.items()}

  def loss(self, outputs, batch):
    return qa_head.span_loss(outputs, batch, self.settings.answerable_weight)

  def predict_answers(self, examples, features, outputs, split):
    c = self.settings
    return qa_postprocess.predict_answers(
        examples, self.windows(examples, features, split), outputs,
        self.tokenizer.vocab.tokens, n_best_size=c.n_best_size,
        max_answer_length=c.max_answer_length, v2=self.task.v2,
        answerable_classifier=c.answerable_classifier,
        lower_case=self.tokenizer.lower_case, accents=self.tokenizer.accents)

  def read_unlabeled(self, path):
    return qa_data.read_questions(path)

  def prediction_records(self, examples, features, outputs):
    predictions = self.predict_answers(examples, features, outputs, PREDICT_SPLIT)
    return qa_postprocess.prediction_records(examples, predictions, self.task.v2,
                                             self.settings.qa_na_threshold)

  def output_file(self, split: str, kind: str) -> str:
    return os.path.join(self.config.results_dir, f"{self.config.tasks_label}_qa",
                        f"{self.task.name.replace('/', '_')}_{split}_{kind}.json")

  @staticmethod
  def _write(path: str, value) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with atomic_write(path) as f:
      json.dump(value, f, indent=2)
    return path

  def write_predictions(self, examples, features, outputs, split, out_dir):
    """Test-set answers as the original submits them: for SQuAD 2.0, "" where the null
    odds exceed qa_na_threshold (no labels to tune it on)."""
    predictions = self.predict_answers(examples, features, outputs, split)
    answers = (qa_postprocess.thresholded(predictions, self.settings.qa_na_threshold)
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
                  qa_postprocess.thresholded(predictions, result["best_f1_thresh"]))
    else:
      result = squad_metrics.evaluate_v1(dataset, predictions.answers)
    self._write(self.output_file(split, "eval"), result)
    return squad_metrics.headline(result, self.task.v2)
