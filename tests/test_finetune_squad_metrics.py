"""finetune/qa/squad_metrics.py (and tools.squad_eval) against tf-models-official's SQuAD v1.1 and v2.0 evaluators."""

import copy
import json
import random

import pytest
from official.nlp.tools import squad_evaluate_v1_1, squad_evaluate_v2_0

from finetune.qa import squad_metrics
from tools import squad_eval
from tests.conftest import shared_path


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


def test_v1_scores_equal_tf_models_official(dev_v1):
  dataset = dev_v1["data"]
  predictions = _perturbed_predictions(dataset, seed=0)
  ours = squad_metrics.evaluate(dataset, predictions)
  theirs = squad_evaluate_v1_1.evaluate(dataset, predictions)
  assert set(ours) == {"exact_match", "f1"}
  assert ours["exact_match"] == pytest.approx(100 * theirs["exact_match"], abs=1e-9)
  assert ours["f1"] == pytest.approx(100 * theirs["final_f1"], abs=1e-9)
  assert 0 < ours["exact_match"] < ours["f1"] < 100
  perfect = {qa["id"]: qa["answers"][0]["text"] for article in dataset
             for p in article["paragraphs"] for qa in p["qas"]}
  assert squad_metrics.evaluate(dataset, perfect) == {"exact_match": 100.0, "f1": 100.0}


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


def test_v2_scores_and_best_thresholds_equal_tf_models_official(dev_v1):
  for seed in (3, 4):
    data, rng = _v2_dataset(dev_v1, seed)
    predictions = _perturbed_predictions(data["data"], seed)
    # Scores above 1.0 are thresholded to "no answer"; repeated values make ties.
    na_probs = {qid: rng.choice([0.0, 0.25, 0.5, 0.9, 1.5, rng.random() * 2])
                for qid in predictions}
    ours = squad_metrics.evaluate(data["data"], predictions, na_probs)
    theirs = squad_evaluate_v2_0.evaluate(data["data"], predictions, na_probs)
    renamed = {"final_exact": "best_exact", "final_exact_thresh": "best_exact_thresh",
               "final_f1": "best_f1", "final_f1_thresh": "best_f1_thresh"}
    expected = {renamed.get(k, k): v for k, v in theirs.items()
                if not k.startswith("pr_")}  # precision-recall curves are plots only
    assert {k: v for k, v in ours.items() if k != "exact_match"} == pytest.approx(expected)
    assert ours["exact_match"] == ours["exact"]
    assert ours["HasAns_total"] > 0 and ours["NoAns_total"] > 0
    # Without no-answer scores there is no threshold search, as the official script.
    plain = squad_metrics.evaluate(data["data"], predictions)
    assert "best_f1" not in plain
    assert plain["exact"] == pytest.approx(
        squad_evaluate_v2_0.evaluate(data["data"], predictions)["exact"])


def test_normalization_and_token_f1_by_hand():
  assert squad_metrics.normalize_answer("  The Eiffel-Tower, an ICON!") == "eiffeltower icon"
  assert squad_metrics.exact_match("a  Paris.", "paris")
  assert squad_metrics.token_f1("the big red dog", "red dog barks") == pytest.approx(
      2 * (2 / 3) * (2 / 3) / (4 / 3))
  assert squad_metrics.token_f1("", "") == 1.0
  assert squad_metrics.token_f1("", "", empty_equals_empty=False) == 0.0


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
                                                                        dev_v1):
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
  official = squad_evaluate_v1_1.evaluate(dataset, predictions)  # the scores stay its
  assert json.loads(out)["exact_match"] == pytest.approx(100 * official["exact_match"])
  assert json.loads(out)["f1"] == pytest.approx(100 * official["final_f1"])

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
