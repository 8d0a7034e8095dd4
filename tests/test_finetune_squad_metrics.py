"""finetune/qa/squad_metrics.py (and tools.squad_eval) on questions scored by hand."""

import copy
import json
import random

import pytest

from finetune.errors import DataError
from finetune.qa import squad_metrics
from tools import squad_eval
from tests.helpers import shared_path


@pytest.fixture(scope="module")
def dev_v1():
  with open(shared_path("squad", "dev-v1.1.json"), encoding="utf-8") as f:
    return json.load(f)


def _perturbed_predictions(dataset, seed):
  """Gold, truncated, case/article/punctuation-changed, wrong, empty and missing answers."""
  rng = random.Random(seed)
  questions = [qa for article in dataset for p in article["paragraphs"] for qa in p["qas"]]
  predictions = {}
  for qa in questions:
    gold = rng.choice(qa["answers"])["text"] if qa["answers"] else ""
    kind = rng.randrange(6)
    if kind == 0:
      predictions[qa["id"]] = gold
    elif kind == 1:
      predictions[qa["id"]] = " ".join(gold.split()[:-1])
    elif kind == 2:
      predictions[qa["id"]] = "The " + gold.upper() + "!"
    elif kind == 3:
      other = rng.choice(questions)
      predictions[qa["id"]] = other["answers"][0]["text"] if other["answers"] else "x"
    elif kind == 4:
      predictions[qa["id"]] = ""
    # kind 5: no prediction at all
  return predictions


def _v2_dataset(dev_v1, seed):
  """Three shared articles with every third question made unanswerable (v2.0 format)."""
  data = copy.deepcopy(dev_v1["data"][:3])
  rng = random.Random(seed)
  for article in data:
    for paragraph in article["paragraphs"]:
      for i, qa in enumerate(paragraph["qas"]):
        if i % 3 == 1:
          qa["plausible_answers"], qa["answers"] = qa["answers"], []
          qa["is_impossible"] = True
        else:
          qa["is_impossible"] = False
  # Some gold answers that normalize to nothing: v2.0 ignores those.
  data[0]["paragraphs"][0]["qas"][0]["answers"].append({"text": "The", "answer_start": 0})
  return {"version": "v2.0", "data": data}, rng


# Hand-scored questions. F1 is over normalized tokens (lowercase, no punctuation, no
# a/an/the): P = common / predicted, R = common / gold, F1 = 2PR / (P + R), the best
# over a question's gold answers.
V1_DATA = [{"paragraphs": [{"qas": [
    {"id": "q1", "answers": [{"text": "Denver Broncos"}, {"text": "The Denver Broncos"}]},
    {"id": "q2", "answers": [{"text": "Saint Bernadette Soubirous"}]},
    {"id": "q3", "answers": [{"text": "a copper statue of Christ"}]}]},
    {"qas": [
        {"id": "q4", "answers": [{"text": "Golden Dome"},
                                 {"text": "the golden dome of the Main Building"}]},
        {"id": "q5", "answers": [{"text": "1879"}]}]}]}]
V1_PREDICTIONS = {
    "q1": "  the DENVER broncos!",  # "denver broncos": exact
    "q2": "Bernadette",  # 1 of 3 gold tokens: P 1, R 1/3, F1 1/2
    "q3": "statue of an angel",  # "statue of angel" against "copper statue of christ":
                                 # 2 common, P 2/3, R 1/2, F1 4/7
    "q4": "dome of the main building",  # 1/3 against "golden dome", 8/9 against the
                                        # second (4 common of 4 and 5 tokens)
    # q5: no prediction, a 0 in both
    "elsewhere": "a question of another data set: not scored"}


def test_v1_scores_by_hand():
  assert squad_metrics.evaluate(V1_DATA, V1_PREDICTIONS) == pytest.approx(
      {"exact_match": 100 * 1 / 5, "f1": 100 * (1 + 1 / 2 + 4 / 7 + 8 / 9 + 0) / 5},
      abs=1e-12)
  perfect = {"q1": "Denver Broncos", "q2": "saint bernadette soubirous.",
             "q3": "copper statue of christ", "q4": "Golden  Dome", "q5": "1879"}
  assert squad_metrics.evaluate(V1_DATA, perfect) == {"exact_match": 100.0, "f1": 100.0}


V2_DATA = [{"paragraphs": [{"qas": [
    {"id": "h1", "answers": [{"text": "in France"}]},
    {"id": "h2", "answers": [{"text": "10th and 11th centuries"}]},
    {"id": "n1", "answers": [], "is_impossible": True},
    {"id": "n2", "answers": [], "is_impossible": True},
    # A gold answer that normalizes to nothing is no gold answer in v2.0.
    {"id": "h3", "answers": [{"text": "The"}, {"text": "Rollo"}]}]}]}]
V2_PREDICTIONS = {
    "h1": "France",  # P 1, R 1/2: exact 0, F1 2/3
    "h2": "10th and 11th centuries",  # exact
    "n1": "",  # no answer, rightly: 1 and 1
    "n2": "Rollo",  # an answer where there is none: 0 and 0
    "h3": "",  # "" against "Rollo" alone: 0 and 0
    "elsewhere": "not scored"}
NO_ANSWER_SCORES = {"h3": 0.1, "h1": 0.2, "h2": 0.5, "n2": 0.6, "n1": 0.9,
                    "elsewhere": 0.0}


def test_v2_scores_at_a_threshold_and_the_best_thresholds_by_hand():
  # At 1.0 no score is above the threshold: every prediction stands.
  result = squad_metrics.evaluate(V2_DATA, V2_PREDICTIONS, NO_ANSWER_SCORES)
  # The best threshold: answer the questions whose score is at most it, "" the rest.
  # From "" everywhere (the 2 unanswerable right), in the scores' order: h3 +0, h1 +0
  # (F1 +2/3), h2 +1, n2 -1 (an answer where there is none), n1 0 (its answer is "").
  # Exact peaks at 3 of 5 after h2, F1 at 2 + 2/3 + 1 after h2 too.
  assert result == pytest.approx({
      "exact_match": 40.0, "exact": 40.0, "f1": 100 * (2 / 3 + 1 + 1) / 5, "total": 5,
      "HasAns_exact": 100 / 3, "HasAns_f1": 100 * (2 / 3 + 1) / 3, "HasAns_total": 3,
      "NoAns_exact": 50.0, "NoAns_f1": 50.0, "NoAns_total": 2,
      "best_exact": 60.0, "best_exact_thresh": 0.5,
      "best_f1": 100 * (2 + 2 / 3 + 1) / 5, "best_f1_thresh": 0.5}, abs=1e-12)
  assert list(result)[:4] == ["exact_match", "exact", "f1", "total"]
  # At 0.4, h2, n2 and n1 say "no answer": h2 loses its 1, n2 gains one.
  at = squad_metrics.evaluate_v2(V2_DATA, V2_PREDICTIONS, NO_ANSWER_SCORES, 0.4)
  assert {k: at[k] for k in ("exact", "f1", "HasAns_exact", "NoAns_exact")} == (
      pytest.approx({"exact": 40.0, "f1": 100 * (2 / 3 + 2) / 5, "HasAns_exact": 0.0,
                     "NoAns_exact": 100.0}, abs=1e-12))
  assert at["best_f1"] == result["best_f1"]  # the search does not depend on it


def test_v2_without_no_answer_scores_scores_the_predicted_questions_only():
  predictions = {k: v for k, v in V2_PREDICTIONS.items() if k != "h1"}
  result = squad_metrics.evaluate(V2_DATA, predictions)
  assert result == pytest.approx({
      "exact_match": 50.0, "exact": 50.0, "f1": 50.0, "total": 4,
      "HasAns_exact": 50.0, "HasAns_f1": 50.0, "HasAns_total": 2,
      "NoAns_exact": 50.0, "NoAns_f1": 50.0, "NoAns_total": 2}, abs=1e-12)
  with pytest.raises(DataError, match="no no-answer probability for question h1"):
    squad_metrics.evaluate(V2_DATA, V2_PREDICTIONS, {"h2": 0.5})
  with pytest.raises(DataError, match="no prediction matches a question"):
    squad_metrics.evaluate(V2_DATA, {"elsewhere": ""})


def _run_cli(capsys, *args):
  code = squad_eval.main([str(a) for a in args])
  captured = capsys.readouterr()
  return code, captured.out, captured.err


def test_command_line(tmp_path, capsys, dev_v1):
  data, _ = _v2_dataset(dev_v1, 5)
  data_file = tmp_path / "dev-v2.0.json"
  data_file.write_text(json.dumps(data))
  questions = [qa for a in data["data"] for p in a["paragraphs"] for qa in p["qas"]]
  predictions = {qa["id"]: (qa["answers"][0]["text"] if qa["answers"] else "")
                 for qa in questions}
  pred_file = tmp_path / "predictions.json"
  pred_file.write_text(json.dumps(predictions))
  na_file = tmp_path / "na.json"
  na_file.write_text(json.dumps({qid: 0.1 for qid in predictions}))
  code, out, _ = _run_cli(capsys, data_file, pred_file, "--na-prob-file", na_file)
  result = json.loads(out)
  assert code == 0
  assert result["exact_match"] == result["f1"] == result["best_f1"] == 100.0
  assert result["NoAns_total"] == sum(1 for qa in questions if not qa["answers"])

  v1_file = tmp_path / "dev-v1.1.json"
  v1_file.write_text(json.dumps({"version": "1.1", "data": dev_v1["data"][:1]}))
  (tmp_path / "none.json").write_text("{}")
  code, out, err = _run_cli(capsys, v1_file, tmp_path / "none.json")
  assert code == 2 and out == ""
  assert err == (f"error: {tmp_path / 'none.json'}: none of its 0 question ids is a "
                 f"question of {v1_file}; are these predictions for another data set?\n")

  # A question without "answers": its place, not a KeyError.
  lacking = json.loads(json.dumps(data))
  qa = lacking["data"][0]["paragraphs"][1]["qas"][2]
  del qa["answers"]
  (tmp_path / "lacking.json").write_text(json.dumps(lacking))
  code, out, err = _run_cli(capsys, tmp_path / "lacking.json", pred_file)
  assert code == 2 and out == ""
  assert err == (f"error: {tmp_path / 'lacking.json'}: article 0 paragraph 1 question "
                 f"{qa['id']}: expected \"answers\", a list of {{\"text\", "
                 "\"answer_start\"} objects (empty for no answer)\n")

  (tmp_path / "broken.json").write_text('{"a": "b",\n "c" 1}')
  code, out, err = _run_cli(capsys, data_file, tmp_path / "broken.json")
  assert code == 2 and out == ""
  assert err.startswith(f"error: {tmp_path / 'broken.json'}:2:6: invalid JSON")
  (tmp_path / "list.json").write_text("[1, 2]")
  code, _, err = _run_cli(capsys, data_file, tmp_path / "list.json")
  assert code == 2 and "question id: str" in err
  na_file.write_text(json.dumps({"only-one": 0.5}))
  code, _, err = _run_cli(capsys, data_file, pred_file, "--na-prob-file", na_file)
  assert code == 2 and "no no-answer probability for question" in err


def test_command_line_counts_unanswered_and_refuses_foreign_predictions(tmp_path, capsys,
                                                                        caplog, dev_v1):
  v1_file = tmp_path / "dev-v1.1.json"
  v1_file.write_text(json.dumps({"version": "1.1", "data": dev_v1["data"][:2]}))
  dataset = dev_v1["data"][:2]
  predictions = _perturbed_predictions(dataset, seed=1)
  questions = [qa["id"] for a in dataset for p in a["paragraphs"] for qa in p["qas"]]
  missing = sum(1 for qid in questions if qid not in predictions)
  assert 0 < missing < len(questions)
  pred_file = tmp_path / "predictions.json"
  pred_file.write_text(json.dumps(predictions))
  code, out, err = _run_cli(capsys, v1_file, pred_file)
  assert code == 0
  assert err == (f"warning: {missing} question(s) of {v1_file} have no prediction in "
                 f"{pred_file}; they score 0, as in the official script\n")
  assert json.loads(out) == squad_metrics.evaluate_v1(dataset, predictions)
  # Not also the official module's line per question (absl's log).
  assert not [r for r in caplog.records if "Unanswered" in r.getMessage()]

  v2_data, _ = _v2_dataset(dev_v1, 5)
  v2_file = tmp_path / "dev-v2.0.json"
  v2_file.write_text(json.dumps(v2_data))
  v2_questions = [qa["id"] for a in v2_data["data"] for p in a["paragraphs"]
                  for qa in p["qas"]]
  v2_predictions = {qid: "" for qid in v2_questions[::2]}
  pred_file.write_text(json.dumps(v2_predictions))
  code, out, err = _run_cli(capsys, v2_file, pred_file)
  assert code == 0 and json.loads(out)["total"] == len(v2_predictions)
  assert err.startswith(f"warning: {len(v2_questions) - len(v2_predictions)} question(s)")
  assert "they are left out of the scores" in err

  # Predictions of another data set: not a score of 0, a refusal naming the file.
  pred_file.write_text(json.dumps({"5733be284776f41900661182": "Saint Bernadette"}))
  code, out, err = _run_cli(capsys, v1_file, pred_file)
  assert code == 2 and out == "" and err.count("\n") == 1
  assert err.startswith(f"error: {pred_file}: none of its 1 question ids "
                        "(e.g. '5733be284776f41900661182') is a question of")
