"""SQuAD scores by the official v1.1 and v2.0 evaluators (tf-models-official's copies of
the scripts the original shipped), in percent, and the checks `tools.squad_eval` makes
before scoring a prediction file.

Added here: v2.0's scores at a no-answer threshold of the caller's (the official module
applies 1.0) and its best thresholds under the names the runs record (best_exact,
best_f1, ...: the module's final_exact, final_f1, ...), only when no-answer scores are
given, as the official script; questions and scores outside the data set are left out.
"""

import json
import logging
from typing import Dict, List, Mapping, Optional, Sequence

from official.nlp.tools import squad_evaluate_v1_1, squad_evaluate_v2_0

from finetune.errors import DataError


def _questions(dataset: Sequence[Mapping]):
  for article in dataset:
    for paragraph in article["paragraphs"]:
      yield from paragraph["qas"]


def is_v2(dataset: Sequence[Mapping]) -> bool:
  """Whether the data has unanswerable questions (SQuAD 2.0)."""
  return any(qa.get("is_impossible", False) or not qa["answers"]
             for qa in _questions(dataset))


def _not_unanswered(record: logging.LogRecord) -> bool:
  return not record.getMessage().startswith("Unanswered question")


def evaluate_v1(dataset: Sequence[Mapping], predictions: Mapping[str, str]) -> Dict:
  """v1.1 scores; a question without a prediction scores 0, as the official script."""
  # The official module logs a line per such question; tools.squad_eval counts them.
  absl_logger = logging.getLogger("absl")
  absl_logger.addFilter(_not_unanswered)
  try:
    official = squad_evaluate_v1_1.evaluate(dataset, predictions)
  finally:
    absl_logger.removeFilter(_not_unanswered)
  return {"exact_match": 100.0 * official["exact_match"],
          "f1": 100.0 * official["final_f1"]}


def evaluate_v2(dataset: Sequence[Mapping], predictions: Mapping[str, str],
                na_probs: Optional[Mapping[str, float]] = None,
                na_prob_thresh: float = 1.0) -> Dict:
  """v2.0 scores over the predicted questions, with the official field names; a
  question whose no-answer score exceeds `na_prob_thresh` is answered "" (no answer)."""
  scored = {qa["id"]: predictions[qa["id"]] for qa in _questions(dataset)
            if qa["id"] in predictions}
  if not scored:
    raise DataError("no prediction matches a question of the data set")
  answered = scored
  if na_probs is not None:
    missing = [qid for qid in scored if qid not in na_probs]
    if missing:
      raise DataError(f"no no-answer probability for question {missing[0]} "
                      f"({len(missing)} missing)")
    # In the caller's order: the threshold search visits tied scores in it.
    na_probs = {qid: p for qid, p in na_probs.items() if qid in scored}
    answered = {qid: "" if na_probs[qid] > na_prob_thresh else text
                for qid, text in scored.items()}
  at_threshold = squad_evaluate_v2_0.evaluate(dataset, answered)
  result = {"exact_match": at_threshold["exact"]}
  result.update((name, value) for name, value in at_threshold.items()
                if not name.startswith(("final_", "pr_")))  # pr_: plots' areas
  if na_probs is not None:
    best = squad_evaluate_v2_0.evaluate(dataset, scored, na_probs)
    result.update((name.replace("final_", "best_"), value) for name, value in best.items()
                  if name.startswith("final_"))
  return result


def gold_dataset(examples) -> List[Dict]:
  """Questions (finetune/qa/data.py's) as a SQuAD data set of one article, the
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
