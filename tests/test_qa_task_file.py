"""A user's question-answering task from its task file: a tiny model fine-tuned through
run_finetuning.py on JSON lines (Hugging Face's answers layout, unanswerable questions,
Chinese contexts) scored on a SQuAD 2.0 dev file, its results named by the task, its
scores the official evaluation's, its --predict and ONNX answers the same (the
SavedModel's: tests/test_serving.py, Chinese contexts included); SQuAD 1.1 files
without "unanswerable"; CJK contexts mapped to the right pieces; bad task files and data
refused in one line."""

import json
import os

import numpy as np
import pytest

import run_finetuning
from data_prep.tokenizer import Tokenizer
from data_prep.vocab import load_vocab
from finetune import tasks
from finetune.errors import DataError
from finetune.qa import data as qa_data
from finetune.qa import deployed as qa_deployed
from finetune.qa import squad_metrics
from tests.export_helpers import run_readers
from tests.helpers import (as_v2, shared_folder, shared_path, squad_subset, write_json,
                           write_tiny_pretrained_model)
from export import registry

NAME = "질문"  # results, heads and exports are named by the task, in any script
SETTINGS = {"max_seq_length": 64, "max_query_length": 16, "doc_stride": 24,
            "beam_size": 6, "n_best_size": 4, "max_answer_length": 10,
            "train_batch_size": 16, "eval_batch_size": 16, "num_train_epochs": 1.0,
            "learning_rate": 1e-3, "write_test_outputs": True, "write_curves": False,
            "export_serving": False}
# "中国" twice in each: an answer at the second must train on the second's pieces.
CHINESE = [(context, question, "中国", context.rindex("中国")) for context, question in (
    ("北京是中国的首都。北京也是中国的文化中心。", "文化中心在哪个国家？"),
    ("上海在中国东部。上海是中国最大的城市。", "最大的城市在哪个国家？"))]


def squad_articles():
  with open(shared_path("squad", "dev-v1.1.json"), encoding="utf-8") as f:
    return json.load(f)["data"]


def question_lines(document, chinese=()):
  """A SQuAD document's questions as JSON lines records (Hugging Face's answers layout;
  every other question SQuAD's list of {"text", "answer_start"}), then Chinese ones."""
  lines = []
  for paragraph in (p for a in document["data"] for p in a["paragraphs"]):
    for qa in paragraph["qas"]:
      answers = ({"text": [a["text"] for a in qa["answers"]],
                  "answer_start": [a["answer_start"] for a in qa["answers"]]}
                 if len(lines) % 2 else qa["answers"])
      lines.append({"id": qa["id"], "question": qa["question"],
                    "context": paragraph["context"], "answers": answers})
  for i, (context, question, answer, start) in enumerate(chinese):
    lines.append({"id": f"zh{i}", "question": question, "context": context,
                  "answers": {"text": [answer], "answer_start": [start]}})
  return lines


def write_lines(path, records):
  path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records),
                  encoding="utf-8")


def run(data, task_file, *extra, **settings):
  return run_finetuning.main(["--task", str(task_file), "--model-name", "tiny",
                              "--data-dir", str(data), "--hparams",
                              json.dumps({**SETTINGS, **settings}), *extra])


def make_lines_task(home):
  """Train on JSON lines (12 SQuAD questions with 4 unanswerable, 2 Chinese), score on
  a SQuAD 2.0 document (6 questions, 2 unanswerable), predict its test file (the dev
  questions, without answers)."""
  articles = squad_articles()
  data = home / "data"
  data.mkdir()
  write_tiny_pretrained_model(data, layers=1)
  train = question_lines(as_v2(squad_subset(articles[:1], 4, 2)), CHINESE)
  dev = as_v2(squad_subset(articles[2:3], 2, 3))
  task = home / "task"
  task.mkdir()
  write_lines(task / "train.jsonl", train)
  write_json(task / "dev.json", dev)
  write_lines(task / "test.jsonl", [{k: v for k, v in line.items() if k != "answers"}
                                    for line in question_lines(dev)])
  (task / "qa.json").write_text(json.dumps(
      {"family": "qa", "name": NAME, "train": "train.jsonl", "dev": "dev.json",
       "test": "test.jsonl"}, ensure_ascii=False), encoding="utf-8")
  assert run(data, task / "qa.json") == 0


@pytest.fixture(scope="module")
def lines_task(tmp_path_factory):
  home = shared_folder(tmp_path_factory, "qa_task_file_lines", make_lines_task)
  return home / "data", home / "task"


@pytest.mark.slow
def test_a_json_lines_task_trains_scores_predicts_and_exports(lines_task, tmp_path,
                                                             capsys):
  data, task = lines_task
  qa_task = tasks.get_task(str(task / "qa.json"))
  assert qa_task.name == NAME and qa_task.v2  # read from the data: some have no answer
  results = data / "models" / "tiny" / "results"
  summary = {k: v["median"] for k, v in json.loads(
      (results / f"{NAME}_results.json").read_text(encoding="utf-8"))["summary"].items()}
  assert set(summary) == {f"{NAME} dev {m}" for m in (
      "exact_match", "f1", "best_exact_match", "best_f1")}
  # The scores are the official evaluation of the written answers on the dev file.
  read = lambda kind: json.loads((results / f"{NAME}_qa" / f"{NAME}_dev_{kind}.json")
                                 .read_text(encoding="utf-8"))
  answers, null_odds = read("preds"), read("null_odds")
  dev = json.loads((task / "dev.json").read_text())["data"]
  official = squad_metrics.evaluate_v2(dev, answers, null_odds, -2.75)
  assert official["HasAns_total"] == 6 and official["NoAns_total"] == 2
  assert read("eval") == official
  for metric, name in (("exact_match", "exact_match"), ("f1", "f1"),
                       ("best_exact_match", "best_exact"), ("best_f1", "best_f1")):
    assert summary[f"{NAME} dev {metric}"] == pytest.approx(official[name])
  # The test file's questions are the dev's: their answers, "" past the threshold.
  trial = data / "models" / "tiny" / "finetuning_models" / f"{NAME}_model_1"
  test_preds = results / "test_predictions" / f"{NAME}_trial1" / f"{NAME}_test_preds.json"
  assert json.loads(test_preds.read_text(encoding="utf-8")) == {
      qid: "" if null_odds[qid] > -2.75 else text for qid, text in answers.items()}

  # --predict: English and Chinese questions (whose contexts have no spaces).
  questions = [(q["question"], p["context"]) for p in dev[0]["paragraphs"]
               for q in p["qas"][:2]] + [(q, c) for c, q, _, _ in CHINESE]
  path = tmp_path / "questions.jsonl"
  write_lines(path, [{"question": q, "context": c} for q, c in questions])
  assert run(data, task / "qa.json", "--predict", str(path)) == 0
  records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
  assert [r["id"] for r in records] == [str(i) for i in range(len(questions))]
  for record, (_, context) in zip(records, questions):
    assert set(record) == {"id", "answer", "start", "end", "probability",
                           "no_answer_score", "no_answer"}
    assert " ".join(context[record["start"]:record["end"]].split()) == record["answer"]
  # Its ONNX file, through the reader shipped beside it, answers the same.
  output = tmp_path / "export"
  registry.export(str(trial), str(output), ["onnx"], variants={"onnx": ["float32"]},
                  log=lambda _: None)
  onnx = run_readers(output, ["model_float32.onnx"],
                     [[q for q, _ in questions], [c for _, c in questions]])
  for record, want in zip(onnx["model_float32.onnx"]["records"], records):
    assert {k: v for k, v in record.items() if k not in ("probability", "no_answer_score")} \
        == {k: v for k, v in want.items() if k not in ("probability", "no_answer_score")}
    assert record["no_answer_score"] == pytest.approx(want["no_answer_score"], abs=1e-4)


@pytest.mark.slow
def test_a_squad_1_task_file_is_scored_as_squad_1(tmp_path):
  articles = squad_articles()
  data = tmp_path / "data"
  data.mkdir()
  write_tiny_pretrained_model(data, layers=1)
  dev = squad_subset(articles[2:3], 2, 3)
  write_json(tmp_path / "train.json", squad_subset(articles[:1], 2, 3))
  write_json(tmp_path / "dev.json", dev)
  (tmp_path / "v1.json").write_text(json.dumps(
      {"family": "qa", "name": "trivia", "train": "train.json", "dev": "dev.json"}))
  assert not tasks.get_task(str(tmp_path / "v1.json")).v2  # every question answered
  assert run(data, tmp_path / "v1.json") == 0
  results = data / "models" / "tiny" / "results"
  answers = json.loads((results / "trivia_qa" / "trivia_dev_preds.json").read_text())
  assert sorted(os.listdir(results / "trivia_qa")) == [
      "trivia_dev_eval.json", "trivia_dev_nbest.json", "trivia_dev_preds.json"]
  summary = json.loads((results / "trivia_results.json").read_text())["summary"]
  official = squad_metrics.evaluate_v1(dev["data"], answers)
  assert {k: v["median"] for k, v in summary.items()} == pytest.approx(
      {"trivia dev exact_match": official["exact_match"], "trivia dev f1": official["f1"]})


def test_chinese_answers_map_to_their_own_pieces_and_characters():
  tokenizer = Tokenizer(load_vocab(shared_path("vocab", "bert_uncased_vocab.txt")))
  vocab = tokenizer.vocab
  for context, question, answer, start in CHINESE:
    assert context.index(answer) < start  # the same text earlier in the context
    example = qa_data.make_example(0, "q", question, context, *qa_data.split_words(context),
                                   [(answer, start)], False, "here")
    windows = qa_data.featurize(tokenizer, [example], 64, 16, 24)
    first = windows.arrays["start_positions"][0]
    last = windows.arrays["end_positions"][0]
    ids = windows.arrays["input_ids"][0]
    # The pieces are the context's characters, one each: the answer's are its own.
    offset = list(ids).index(vocab.sep_id) + 1
    assert (first - offset, last - offset + 1) == (start, start + len(answer))
    assert [vocab.tokens[i] for i in ids[first:last + 1]] == list(answer)
    # An answer read back from those pieces is that place in the context.
    logits = np.full([1, 64], -10.0, np.float32)
    start_logits, end_logits = logits.copy(), logits.copy()
    start_logits[0, first], end_logits[0, last] = 10.0, 10.0
    predictions = qa_deployed.predict_answers(
        [example], windows, {"start_logits": start_logits, "end_logits": end_logits},
        vocab.tokens, n_best_size=4, max_answer_length=10, v2=False,
        answerable_classifier=False, lower_case=True)
    assert predictions.answers == {"q": answer}
    assert predictions.spans == {"q": (start, start + len(answer))}


def write_task(folder, spec, files):
  for name, text in files.items():
    (folder / name).write_text(text, encoding="utf-8")
  (folder / "task.json").write_text(json.dumps(spec), encoding="utf-8")
  return str(folder / "task.json")


GOOD = json.dumps({"id": "a", "question": "Who?", "context": "Ann did.",
                   "answers": {"text": ["Ann"], "answer_start": [0]}}) + "\n"


@pytest.mark.parametrize("spec,files,message", [
    ({"name": "t", "train": "train.jsonl", "dev": "dev.jsonl", "answers": "x"}, {},
     "unknown task file key 'answers'"),
    ({"train": "train.jsonl"}, {}, 'missing "name", a non-empty string$'),
    ({"name": "t", "train": "train.jsonl", "unanswerable": "yes"}, {"train.jsonl": GOOD},
     "\"unanswerable\" must be true or false, got 'yes'$"),
    ({"name": "t", "train": "missing.jsonl"}, {},
     "missing.jsonl: the train file of task t does not exist$"),
    ({"name": "t", "train": "train.jsonl"}, {"train.jsonl": "\n\n"},
     "train.jsonl: empty file; expected a SQuAD JSON document or JSON lines of questions$"),
    ({"name": "t", "train": "train.jsonl"}, {"train.jsonl": GOOD + GOOD},
     "train.jsonl: question id 'a' is given twice; each question needs an id of its own$"),
    ({"name": "t", "train": "train.jsonl"},
     {"train.jsonl": GOOD + '{"question": "Who?", "answers": []}\n'},
     'train.jsonl:2: no "context" text$'),
    ({"name": "t", "train": "train.jsonl"},
     {"train.jsonl": GOOD + '\n{"question": " ", "context": "x", "answers": []}\n'},
     "train.jsonl:3: empty question$"),
    ({"name": "t", "train": "train.jsonl"},
     {"train.jsonl": '{"question": "Who?", "context": "Ann did.", "answer": "Ann"}\n'},
     'train.jsonl:1: no "answers" \\(an empty list for a question without an answer\\)$'),
    ({"name": "t", "train": "train.jsonl", "unanswerable": False},
     {"train.jsonl": GOOD + '{"question": "Why?", "context": "Ann did.", "answers": []}\n'},
     'train.jsonl:2: no answers \\(t has no unanswerable questions; give "unanswerable": '
     "true in its task file\\)$"),
    ({"name": "t", "train": "train.jsonl"},
     {"train.jsonl": '{"question": "Who?", "context": "Ann did.", "answers": '
                     '{"text": ["Ann"], "answer_start": [0, 4]}}\n'},
     'train.jsonl:1: "answers" must be a list of'),
    ({"name": "t", "train": "train.jsonl"},
     {"train.jsonl": '{"question": "Who?", "context": "Ann did.", "answers": '
                     '[{"text": "Ann", "answer_start": 9}]}\n'},
     "train.jsonl:1: answer 'Ann' at offset 9 runs outside the context"),
])
def test_bad_task_files_and_data_are_one_line(tmp_path, spec, files, message):
  path = write_task(tmp_path, {"family": "qa", **spec}, files)
  with pytest.raises(DataError, match=message):
    task = tasks.get_task(path)
    tasks.read_examples(task, "unused", "train")


def test_a_training_file_with_no_answer_at_its_offset_is_refused_in_one_line(
    tmp_path, capsys):
  data = tmp_path / "data"
  data.mkdir()
  write_tiny_pretrained_model(data, layers=1)
  lines = [json.dumps({"question": "Who?", "context": f"Ann and Bob did {i}.",
                       "answers": [{"text": "Bob", "answer_start": 0}]}) + "\n"
           for i in range(3)]
  path = write_task(tmp_path, {"family": "qa", "name": "t", "train": "train.jsonl"},
                    {"train.jsonl": "".join(lines)})
  assert run(data, path) == 2
  assert capsys.readouterr().err.splitlines()[-1] == (
      "error: t train: none of its 3 answerable questions has a gold answer whose text is "
      f"in the context at its answer_start (first: {tmp_path / 'train.jsonl'}:1: answer "
      "'Bob' at 0, where the context reads 'Ann'); answer_start must be the answer's "
      "first character in the context, counted from 0")
  # --output never writes over the task's files (refused before any model is read).
  assert run(data, path, "--predict", path, "--output", str(tmp_path / "train.jsonl")) == 2
  assert capsys.readouterr().err.splitlines()[-1] == (
      f"error: --output {tmp_path / 'train.jsonl'} is an input of this command (the train "
      f"file of task t: {tmp_path / 'train.jsonl'}); choose another --output")
  # A task file naming no family that takes one.
  spec = tmp_path / "other.json"
  spec.write_text(json.dumps({"family": "qaa", "name": "t", "train": "train.jsonl"}))
  assert run(data, spec) == 2
  assert capsys.readouterr().err.splitlines()[-1] == (
      f"error: {spec}: \"family\": unknown task family 'qaa'; did you mean 'qa'? (expected one "
      "of qa, sentence, tagging)")
