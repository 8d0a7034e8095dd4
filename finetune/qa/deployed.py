"""A QA task's exported model as the reader (export/reader.py) sees it: questions and
their contexts to the windows of finetune/qa/features.py (the run's max_query_length
and doc_stride; a long context gives several rows), the head's outputs on every window
to --predict's records by finetune/qa/postprocess.py (answer, its characters start and
end in the context, probability; SQuAD 2.0: no_answer_score and no_answer). numpy only:
shipped with the export."""

from typing import Dict, List, Optional, Sequence

import numpy as np

from finetune.qa.examples import make_example, split_words
from finetune.qa.features import featurize
from finetune.qa.postprocess import predict_answers, prediction_records

INPUTS = ("input_ids", "input_mask", "segment_ids")


class Reader:
  """inputs(questions, contexts[, ids]) -> the model's inputs, one row per window;
  records(outputs) -> one record per question of the last inputs call."""

  def __init__(self, info: Dict[str, object], tokenizer):
    self.info, self.tokenizer = info, tokenizer
    self._last = None

  def inputs(self, questions: Sequence[str], contexts: Sequence[str],
             ids: Optional[Sequence[str]] = None) -> Dict[str, np.ndarray]:
    if len(questions) != len(contexts):
      raise ValueError(f"{len(questions)} questions but {len(contexts)} contexts; give "
                       "one context per question")
    examples = []
    for index, (question, context) in enumerate(zip(questions, contexts)):
      qid = str(index if ids is None else ids[index])
      if not isinstance(context, str) or not context.strip():
        raise ValueError(f"question {qid}: empty context")
      examples.append(make_example(index, qid, question, context, *split_words(context),
                                   [], False, f"question {qid}"))
    info = self.info
    windows = featurize(self.tokenizer, examples, info["max_seq_length"],
                        info["max_query_length"], info["doc_stride"])
    self._last = examples, windows
    return {name: windows.arrays[name] for name in INPUTS}

  def records(self, outputs: Dict[str, np.ndarray]) -> List[Dict[str, object]]:
    if self._last is None:
      raise ValueError("records(outputs) reads the outputs of inputs(questions, "
                       "contexts): call inputs first")
    examples, windows = self._last
    info = self.info
    predictions = predict_answers(
        examples, windows, outputs, self.tokenizer.vocab.tokens,
        n_best_size=info["n_best_size"], max_answer_length=info["max_answer_length"],
        v2=info["v2"], answerable_classifier=info["answerable_classifier"],
        lower_case=self.tokenizer.lower_case, accents=self.tokenizer.accents)
    return prediction_records(examples, predictions, info["v2"], info["qa_na_threshold"])
