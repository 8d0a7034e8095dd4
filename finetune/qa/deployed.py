"""From span scores on QA windows back to answer texts: the original's post-processing,
which the runner scores and predicts with, and the exported model as the reader
(export/reader.py) sees it.

For each question, candidate spans from all of its windows (the joint head's beam of
starts and, per start, of ends; or the n_best_size best starts x ends of independent
logits) are kept when both ends lie in the context, the start is in the window where
its piece has the most context, the end does not precede the start and the span has at
most max_answer_length pieces. They are ranked by start + end score, and the first
n_best_size distinct texts form the n-best list. A span's text is its word pieces
joined back together, projected onto the original words' characters (final_span, the
original's get_final_text; the words joined by one space, or none between CJK
characters: span_words), so the answer keeps the context's case and punctuation but not
the extra characters of a word it only partly covers. For SQuAD 2.0 the question's
null score is the smallest over its windows of the answerability logit (or of the [CLS]
start + end scores without that classifier); "no answer" when it exceeds a threshold.

The Reader turns questions and contexts into data.py's windows and the head's outputs
on them into --predict's records. numpy only: shipped with the export.
"""

import dataclasses
import unicodedata
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from data_prep.tokenizer import basic_words
from finetune.qa.data import QAExample, Windows, featurize, make_example, split_words


@dataclasses.dataclass
class Predictions:
  answers: Dict[str, str]                 # question id -> best (non-null) answer text
  nbest: Dict[str, List[Dict[str, object]]]
  null_odds: Dict[str, float]             # SQuAD 2.0: larger means "no answer"
  # [start, end) of each answer in its context's characters (none for a placeholder)
  spans: Dict[str, Tuple[int, int]] = dataclasses.field(default_factory=dict)


def best_indexes(logits: np.ndarray, n: int) -> np.ndarray:
  """Indexes of the n largest logits, best first; ties keep index order."""
  return np.argsort(-logits, kind="stable")[:n]


def _is_skipped(char: str) -> bool:
  """Spaces, and what BERT's text cleaning drops or makes a space (e.g. U+200B, U+00A0)."""
  return char.isspace() or unicodedata.category(char)[0] in "CZ"


def _strip_spaces(text: str) -> Tuple[str, List[int]]:
  """The text without spaces, and each kept character's position in the text."""
  if text.isascii() and text.isprintable():
    kept = [i for i, char in enumerate(text) if char != " "]
  else:
    kept = [i for i, char in enumerate(text) if not _is_skipped(char)]
  return "".join(text[i] for i in kept), kept


def final_span(pred_text: str, orig_text: str, lower_case: bool = True,
               accents: bool = True) -> Tuple[int, int]:
  """[start, end) of the part of orig_text (original words) that the normalized
  pred_text covers.

  pred_text comes from word pieces, so it is normalized (lower_case, accents: the
  tokenizer's) and split at punctuation. orig_text is basic-tokenized the same way;
  when the two agree character for character outside spaces, pred_text's place in it
  maps back onto orig_text. Otherwise the whole orig_text is the answer.
  """
  whole = (0, len(orig_text))
  tok_text = " ".join(basic_words(orig_text, lower_case, accents))
  start = tok_text.find(pred_text)
  if start < 0:
    return whole
  end = start + len(pred_text) - 1
  orig_chars, orig_positions = _strip_spaces(orig_text)
  tok_chars, tok_positions = _strip_spaces(tok_text)
  if len(orig_chars) != len(tok_chars):
    return whole
  tok_to_stripped = {position: i for i, position in enumerate(tok_positions)}
  if start not in tok_to_stripped or end not in tok_to_stripped:
    return whole  # pred_text starts or ends with a space
  return (orig_positions[tok_to_stripped[start]],
          orig_positions[tok_to_stripped[end]] + 1)


def span_words(example: QAExample, word_starts, first: int, last: int
               ) -> Tuple[str, List[int]]:
  """The context's words first..last as one text (final_span's orig_text): one space
  where whitespace parts two, as the original joins them, none where nothing does (CJK
  characters); and each of its characters' place in the context (-1: a space put in)."""
  text, places = [], []
  for w in range(first, last + 1):
    word, start = example.doc_tokens[w], int(word_starts[w])
    if w > first and start > word_starts[w - 1] + len(example.doc_tokens[w - 1]):
      text.append(" ")
      places.append(-1)
    text.append(word)
    places.extend(range(start, start + len(word)))
  return "".join(text), places


def piece_text(tokens: Sequence[str]) -> str:
  """Word pieces joined into text: "##" continuations glued on, whitespace collapsed."""
  text = " ".join(tokens).replace(" ##", "").replace("##", "")
  return " ".join(text.split())


def window_candidates(outputs: Mapping[str, np.ndarray], window: int, n_best_size: int):
  """(start, end, start score, end score) arrays of one window, in the original's order."""
  if "start_top_index" in outputs:  # joint head: a beam of starts, each with its ends
    starts = outputs["start_top_index"][window]
    ends = outputs["end_top_index"][window]
    beam = ends.shape[-1]
    return (np.repeat(starts, beam), ends.reshape(-1),
            np.repeat(outputs["start_top_log_probs"][window], beam),
            outputs["end_top_log_probs"][window].reshape(-1))
  start_logits, end_logits = outputs["start_logits"][window], outputs["end_logits"][window]
  starts = best_indexes(start_logits, n_best_size)
  ends = best_indexes(end_logits, n_best_size)
  starts, ends = np.repeat(starts, len(ends)), np.tile(ends, len(starts))
  return starts, ends, start_logits[starts], end_logits[ends]


def null_score(outputs: Mapping[str, np.ndarray], window: int,
               answerable_classifier: bool) -> float:
  """A window's "no answer" score: the classifier's logit, else [CLS]'s span score."""
  if answerable_classifier:
    return float(outputs["answerable_logit"][window])
  score = outputs["start_logits"][window, 0]
  if "end_logits" in outputs:  # the joint head scores ends only after a start
    score += outputs["end_logits"][window, 0]
  return float(score)


def _softmax(scores: Sequence[float]) -> np.ndarray:
  scores = np.asarray(scores, np.float64)
  exp = np.exp(scores - scores.max())
  return exp / exp.sum()


def predict_answers(examples: Sequence[QAExample], windows: Windows, outputs,
                    vocab_tokens: Sequence[str], *, n_best_size: int,
                    max_answer_length: int, v2: bool, answerable_classifier: bool,
                    lower_case: bool, accents: bool = True) -> Predictions:
  """Every question's answer, n-best list and (SQuAD 2.0) null score."""
  input_ids = windows.arrays["input_ids"]
  bounds = np.searchsorted(windows.example_index, np.arange(len(examples) + 1))
  result = Predictions({}, {}, {})
  for index, example in enumerate(examples):
    _, char_to_word = split_words(example.context)
    word_starts = np.searchsorted(char_to_word, np.arange(len(example.doc_tokens)))
    parts, null = [], np.inf
    for window in range(bounds[index], bounds[index + 1]):
      if v2:
        null = min(null, null_score(outputs, window, answerable_classifier))
      starts, ends, start_scores, end_scores = window_candidates(outputs, window,
                                                                 n_best_size)
      to_word = windows.token_to_word[window]
      # Outside the context (question, [CLS], [SEP], padding) the word is -1.
      keep = ((to_word[starts] >= 0) & (to_word[ends] >= 0) &
              windows.max_context[window, starts] & (ends >= starts) &
              (ends - starts + 1 <= max_answer_length))
      parts.append((np.full(keep.sum(), window), starts[keep], ends[keep],
                    start_scores[keep], end_scores[keep]))
    # Every example has a window (featurize makes one even for an empty context).
    window_of, starts, ends, start_scores, end_scores = (
        np.concatenate(column) for column in zip(*parts))
    order = np.argsort(-(start_scores + end_scores), kind="stable")
    nbest, seen = [], set()
    for k in order:
      if len(nbest) >= n_best_size:
        break
      window, start, end = window_of[k], starts[k], ends[k]
      pred_text = piece_text([vocab_tokens[i] for i in input_ids[window, start:end + 1]])
      to_word = windows.token_to_word[window]
      orig_text, places = span_words(example, word_starts, to_word[start], to_word[end])
      span = final_span(pred_text, orig_text, lower_case, accents)
      text = orig_text[span[0]:span[1]]
      if text not in seen:
        seen.add(text)
        nbest.append((text, float(start_scores[k]), float(end_scores[k]),
                      (places[span[0]], places[span[1] - 1] + 1)))
    if not nbest:  # no valid span at all: a placeholder, as the original
      nbest.append(("empty", 0.0, 0.0, None))
    probabilities = _softmax([s + e for _, s, e, _ in nbest])
    result.nbest[example.qid] = [
        {"text": text, "probability": float(p), "start_logit": s, "end_logit": e}
        for (text, s, e, _), p in zip(nbest, probabilities)]
    best = next((entry for entry in nbest if entry[0]), ("", 0.0, 0.0, None))
    result.answers[example.qid] = best[0] if v2 else nbest[0][0]
    chosen = best if v2 else nbest[0]
    if chosen[3] is not None:
      result.spans[example.qid] = chosen[3]
    if v2:
      result.null_odds[example.qid] = (null if answerable_classifier
                                       else null - best[1] - best[2])
  return result


def thresholded(predictions: Predictions, threshold: float) -> Dict[str, str]:
  """SQuAD 2.0 answers: "" where the null odds exceed the threshold."""
  return {qid: "" if predictions.null_odds[qid] > threshold else text
          for qid, text in predictions.answers.items()}


def prediction_records(examples: Sequence[QAExample], predictions: Predictions, v2: bool,
                       threshold: float) -> List[Dict[str, object]]:
  """--predict's record of each question: the answer, its [start, end) characters in the
  context and its n-best probability; for SQuAD 2.0 also the null odds and whether they
  pass `threshold` (no answer)."""
  records = []
  for example in examples:
    qid, answer = example.qid, predictions.answers[example.qid]
    start, end = predictions.spans.get(qid, (None, None))
    record = {"id": qid, "answer": answer, "start": start, "end": end,
              "probability": next((e["probability"] for e in predictions.nbest[qid]
                                   if e["text"] == answer), 0.0)}
    if v2:
      null_odds = predictions.null_odds[qid]
      record.update(no_answer_score=null_odds, no_answer=null_odds > threshold)
    records.append(record)
  return records


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
