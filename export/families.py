"""What each task family's exported model takes and returns, and the module of the
family's own that reads it (numpy only, shipped beside the model files).

A family exports when it has an entry in DEPLOYABLE: the writers of export/ read only
these fields, so a new family is its reader module (copy finetune/tagging/deployed.py's
shape: a Reader(info, tokenizer) with inputs(...) and records(outputs)) and one entry
here, without touching a writer.
"""

import dataclasses
from typing import Callable, Dict, Sequence, Tuple

import numpy as np
import tensorflow as tf

from export.source import Finetuned
from finetune.qa import features as qa_features
from finetune.sentence import features as sentence_features
from finetune.sentence.files import unlabeled_layout
from finetune.sentence.serving import numeric_outputs
from finetune.tagging import features as tagging_features


@dataclasses.dataclass(frozen=True)
class Deployable:
  # The module (dotted path) whose Reader(info, tokenizer) turns texts into the model's
  # inputs and its outputs into --predict's records; it and the project modules it
  # imports are shipped (numpy only).
  reader: str
  # The exported model's inputs, each int32 [B, L]: L the batch's longest example, or
  # max_seq_length where `fixed_length` (export/registry.py Job.model_function).
  inputs: Tuple[str, ...]
  # (model, head outputs) -> the exported model's outputs (named tensors, TensorFlow).
  outputs: Callable[[Finetuned, object], Dict[str, tf.Tensor]]
  # (model, examples of its task) -> their model inputs (the full-int8 calibration).
  features: Callable[[Finetuned, Sequence], Dict[str, np.ndarray]]
  # model -> the deploy.json fields its reader reads besides the shared ones.
  info: Callable[[Finetuned], Dict[str, object]]
  # True when the head stays float32 in the full-int8 model: its outputs span a range
  # that int8 cannot hold (QA's -1000 on the positions outside the context: calibrated
  # to int8, every real logit became one value and no int8 answer was --predict's).
  float_head: bool = False
  # True when the files keep max_seq_length: QA's joint head, at a free length, converts
  # to a strided slice (a new axis over a free one) LiteRT has no builtin kernel for.
  fixed_length: bool = False


def _sentence_info(finetuned: Finetuned) -> Dict[str, object]:
  task = finetuned.task
  return {"labels": list(task.labels or []), "regression": task.is_regression,
          "pair": unlabeled_layout(task)[1].text_b is not None}


def _qa_features(finetuned: Finetuned, examples) -> Dict[str, np.ndarray]:
  qa = finetuned.runner.settings
  return qa_features.featurize(finetuned.tokenizer(), examples, finetuned.max_seq_length,
                               qa.max_query_length, qa.doc_stride).arrays


QA_FIELDS = ("max_query_length", "doc_stride", "n_best_size", "max_answer_length",
             "answerable_classifier", "qa_na_threshold")

DEPLOYABLE = {
    "sentence": Deployable(
        reader="finetune.sentence.deployed",
        inputs=("input_ids", "input_mask", "segment_ids"),
        outputs=lambda finetuned, out: numeric_outputs(finetuned.task, out),
        features=lambda finetuned, examples: sentence_features.encode(
            finetuned.tokenizer(), examples, finetuned.max_seq_length),
        info=_sentence_info),
    "tagging": Deployable(
        reader="finetune.tagging.deployed",
        inputs=("input_ids", "input_mask", "segment_ids", "word_positions"),
        outputs=lambda finetuned, out: {"logits": out},
        features=lambda finetuned, examples: tagging_features.encode(
            finetuned.tokenizer(), examples, finetuned.max_seq_length),
        info=lambda finetuned: {"labels": list(tagging_features.LABELS)}),
    "qa": Deployable(
        reader="finetune.qa.deployed",
        inputs=("input_ids", "input_mask", "segment_ids"),
        # The head's inference outputs as postprocess.predict_answers reads them.
        outputs=lambda finetuned, out: dict(out),
        features=_qa_features,
        info=lambda finetuned: {"v2": finetuned.task.v2,
                                **{k: getattr(finetuned.runner.settings, k)
                                   for k in QA_FIELDS}},
        float_head=True, fixed_length=True),
}
