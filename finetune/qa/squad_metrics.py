"""SQuAD exact match and F1 as the official v1.1 and v2.0 evaluation scripts define them.

Answers are compared after the official normalization (lowercase, drop punctuation and
the articles a/an/the, collapse whitespace), taking the best score over the gold answers.
SQuAD 2.0 adds the HasAns/NoAns breakdown and, given no-answer probabilities (or any
score where larger means "no answer"), the threshold that maximizes each metric.

`python -m tools.squad_eval` scores a prediction file with it, as the official scripts do.
"""

import collections
import json
import re
import string
from typing import Dict, List, Mapping, Optional, Sequence

from finetune.errors import DataError

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
  text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
  return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, gold: str) -> bool:
  return normalize_answer(prediction) == normalize_answer(gold)


def token_f1(prediction: str, gold: str, empty_equals_empty: bool = True) -> float:
  """Bag-of-tokens F1 after normalization.

  With no tokens on either side, v2.0 scores 1 if both are empty (a correct "no
  answer"); v1.1 has no unanswerable questions and scores 0 (`empty_equals_empty=False`).
  """
  predicted, expected = normalize_answer(prediction).split(), normalize_answer(gold).split()
  if empty_equals_empty and (not predicted or not expected):
    return float(predicted == expected)
  common = sum((collections.Counter(predicted) & collections.Counter(expected)).values())
  if common == 0:
    return 0.0
  precision, recall = common / len(predicted), common / len(expected)
  return 2 * precision * recall / (precision + recall)


def _questions(dataset: Sequence[Mapping]):
  for article in dataset:
    for paragraph in article["paragraphs"]:
      yield from paragraph["qas"]


def is_v2(dataset: Sequence[Mapping]) -> bool:
  """Whether the data has unanswerable questions (SQuAD 2.0)."""
  return any(qa.get("is_impossible", False) or not qa["answers"]
             for qa in _questions(dataset))


def evaluate_v1(dataset: Sequence[Mapping], predictions: Mapping[str, str]) -> Dict:
  """v1.1 scores; a question without a prediction scores 0, as the official script."""
  exact = f1 = total = 0.0
  for qa in _questions(dataset):
    total += 1
    if qa["id"] not in predictions:
      continue
    golds = [answer["text"] for answer in qa["answers"]]
    prediction = predictions[qa["id"]]
    exact += max(exact_match(prediction, gold) for gold in golds)
    f1 += max(token_f1(prediction, gold, empty_equals_empty=False) for gold in golds)
  return {"exact_match": 100.0 * exact / total, "f1": 100.0 * f1 / total}


def _best_threshold(predictions, scores, na_probs, has_answer):
  """Threshold on na_probs maximizing the mean score, searched as the official script."""
  best = current = sum(1 for qid in scores if not has_answer[qid])
  best_threshold = 0.0
  for qid in sorted(na_probs, key=lambda q: na_probs[q]):
    if qid not in scores:
      continue
    if has_answer[qid]:
      current += scores[qid]
    elif predictions[qid]:
      current -= 1
    if current > best:
      best, best_threshold = current, na_probs[qid]
  return 100.0 * best / len(scores), best_threshold


def evaluate_v2(dataset: Sequence[Mapping], predictions: Mapping[str, str],
                na_probs: Optional[Mapping[str, float]] = None,
                na_prob_thresh: float = 1.0) -> Dict:
  """v2.0 scores over the predicted questions, with the official field names."""
  has_answer, exact_raw, f1_raw = {}, {}, {}
  for qa in _questions(dataset):
    qid = qa["id"]
    if qid not in predictions:
      continue
    golds = [a["text"] for a in qa["answers"] if normalize_answer(a["text"])] or [""]
    has_answer[qid] = bool(qa["answers"])
    exact_raw[qid] = float(max(exact_match(predictions[qid], g) for g in golds))
    f1_raw[qid] = max(token_f1(predictions[qid], g) for g in golds)
  if not exact_raw:
    raise DataError("no prediction matches a question of the data set")
  probs = na_probs if na_probs is not None else {qid: 0.0 for qid in exact_raw}

  def thresholded(raw):
    # Above the threshold the model says "no answer": right exactly when there is none.
    return {qid: float(not has_answer[qid]) if probs.get(qid, 0.0) > na_prob_thresh
            else score for qid, score in raw.items()}

  exact, f1 = thresholded(exact_raw), thresholded(f1_raw)

  def summary(qids: List[str]):
    return {"exact": 100.0 * sum(exact[q] for q in qids) / len(qids),
            "f1": 100.0 * sum(f1[q] for q in qids) / len(qids), "total": len(qids)}

  result = summary(list(exact))
  result = {"exact_match": result["exact"], **result}
  for prefix, wanted in (("HasAns", True), ("NoAns", False)):
    qids = [q for q in exact if has_answer[q] == wanted]
    if qids:
      result.update({f"{prefix}_{k}": v for k, v in summary(qids).items()})
  if na_probs is not None:
    missing = [qid for qid in exact_raw if qid not in na_probs]
    if missing:
      raise DataError(f"no no-answer probability for question {missing[0]} "
                      f"({len(missing)} missing)")
    for name, raw in (("exact", exact_raw), ("f1", f1_raw)):
      best, threshold = _best_threshold(predictions, raw, na_probs, has_answer)
      result[f"best_{name}"], result[f"best_{name}_thresh"] = best, threshold
  return result


def gold_dataset(examples) -> List[Dict]:
  """Questions (finetune/qa/examples.py's) as a SQuAD data set of one article, the
  evaluations' input."""
  return [{"paragraphs": [{"qas": [
      {"id": e.qid, "is_impossible": e.is_impossible,
       "answers": [{"text": text} for text in e.gold_texts]} for e in examples]}]}]


def headline(result: Mapping, v2: bool) -> Dict[str, float]:
  """A fine-tuning run's metrics of an evaluation's result: exact_match and f1 (v2.0:
  at the threshold given), and for v2.0 the best over every threshold."""
  metrics = {"exact_match": result["exact_match"], "f1": result["f1"]}
  if v2:
    metrics.update(best_exact_match=result["best_exact"], best_f1=result["best_f1"])
  return metrics


def evaluate(dataset: Sequence[Mapping], predictions: Mapping[str, str],
             na_probs: Optional[Mapping[str, float]] = None) -> Dict:
  """v2.0 scoring for data with unanswerable questions or when na_probs are given."""
  if na_probs is not None or is_v2(dataset):
    return evaluate_v2(dataset, predictions, na_probs)
  return evaluate_v1(dataset, predictions)


def load_json(path: str, what: str):
  try:
    with open(path, encoding="utf-8") as f:
      return json.load(f)
  except OSError as e:
    raise DataError(f"{path}: cannot read the {what} ({e.strerror})") from None
  except json.JSONDecodeError as e:
    raise DataError(f"{path}:{e.lineno}:{e.colno}: invalid JSON in the {what}: "
                    f"{e.msg}") from None
  except UnicodeDecodeError as e:
    raise DataError(f"{path}: the {what} are not UTF-8 text (byte {e.start})") from None


def expect_mapping(value, path: str, what: str, value_type) -> Dict:
  if not isinstance(value, dict) or not all(isinstance(v, value_type)
                                            for v in value.values()):
    raise DataError(f"{path}: expected the {what} as a JSON object of question id: "
                    f"{value_type.__name__ if isinstance(value_type, type) else 'number'}")
  return value


def check_layout(dataset: Sequence[Mapping], data_file: str):
  """A DataError naming the first article, paragraph or question that lacks what
  scoring reads (a "paragraphs" list, a "qas" list, each question's "id" and its
  "answers" of {"text", ...})."""
  def fail(where, problem):
    raise DataError(f"{data_file}: {where}: {problem}")
  for a, article in enumerate(dataset):
    if not isinstance(article, dict) or not isinstance(article.get("paragraphs"), list):
      fail(f"article {a}", "expected an object with a \"paragraphs\" list")
    for p, paragraph in enumerate(article["paragraphs"]):
      where = f"article {a} paragraph {p}"
      if not isinstance(paragraph, dict) or not isinstance(paragraph.get("qas"), list):
        fail(where, "expected an object with a \"qas\" list")
      for q, qa in enumerate(paragraph["qas"]):
        if not isinstance(qa, dict) or "id" not in qa:
          fail(f"{where} question {q}", "no \"id\"")
        answers = qa.get("answers")
        if not isinstance(answers, list) or not all(
            isinstance(answer, dict) and isinstance(answer.get("text"), str)
            for answer in answers):
          fail(f"{where} question {qa['id']}", "expected \"answers\", a list of "
               "{\"text\", \"answer_start\"} objects (empty for no answer)")


def check_coverage(dataset: Sequence[Mapping], predictions: Mapping[str, str],
                   pred_file: str, data_file: str) -> int:
  """How many questions have no prediction; a DataError when none has one."""
  qids = [qa["id"] for qa in _questions(dataset)]
  missing = sum(1 for qid in qids if qid not in predictions)
  if qids and missing == len(qids):
    example = f" (e.g. {next(iter(predictions))!r})" if predictions else ""
    raise DataError(f"{pred_file}: none of its {len(predictions)} question ids{example} "
                    f"is a question of {data_file}; are these predictions for another "
                    "data set?")
  return missing
