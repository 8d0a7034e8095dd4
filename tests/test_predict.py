"""run_finetuning.py --predict: a fine-tuned tiny model's predictions on a user's file
equal what its own evaluation path computes on the same inputs, for sentence pairs,
regression, SQuAD 2.0 (JSON lines and SQuAD JSON) and chunking; refusals are one line.
The single-sentence, regression and chunking models are export_helpers' (trained once
per session), which --predict only reads."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import run_finetuning
from finetune import config as finetune_config
from finetune import tasks, trainer
from finetune.tagging import data as tagging_data
from finetune.tagging import metrics as tagging_metrics
from tests.export_helpers import (CHUNK, GLUE, GLUE_DEV_ROWS, shared_chunk_model,
                                   shared_glue_models)
from tests.helpers import (as_v2, head_of, ROOT, shared_path, squad_subset, write_json,
                           write_tiny_pretrained_model)


def train(data, task, overrides):
  # No serving export (tests/test_serving.py checks it against --predict), no curves.
  config = finetune_config.load_config("tiny", [task], str(data),
                                       {**overrides, "export_serving": False,
                                        "write_curves": False})
  trainer.run(config, log=lambda _: None)
  return config


def predict(data, task, overrides, path, output, capsys):
  """run_finetuning.main with --predict; (exit code, stderr, JSON lines written)."""
  code = run_finetuning.main(["--task", task, "--model-name", "tiny", "--data-dir",
                              str(data), "--hparams", json.dumps(overrides),
                              "--predict", str(path), "--output", str(output)])
  err = capsys.readouterr().err
  lines = ([json.loads(line) for line in open(output, encoding="utf-8")]
           if code == 0 else None)
  return code, err, lines


def eval_outputs(config, split):
  """The evaluation path's head outputs on a split, and a direct Keras call's."""
  finetuner = trainer.Finetuner(config, log=lambda _: None)
  model = finetuner.build_model()
  finetuner.restore(model, 1)
  data, outputs = finetuner.outputs(model, 0, split)
  direct = model({k: tf.constant(v) for k, v in data.features.items()}, training=False)
  return finetuner, data, outputs, direct[finetuner.runners[0].head_name].numpy()


SENTENCE = {"train_batch_size": 16, "eval_batch_size": 16, "max_seq_length": 32,
            "num_train_epochs": 1.0}


@pytest.mark.slow
def test_sentence_pair_and_regression_predictions_match_evaluation(tmp_path,
                                                                   tmp_path_factory, capsys):
  data = tmp_path / "data"
  for split in ("train", "dev"):
    head_of(shared_path("glue", "MRPC", f"{split}.tsv"),
            data / "finetuning_data" / "MRPC" / f"{split}.tsv", 49)
  write_tiny_pretrained_model(data)
  mrpc_dev = data / "finetuning_data" / "MRPC" / "dev.tsv"
  output = tmp_path / "mrpc.jsonl"

  # Before training: one line naming the missing model and the command that trains it.
  code, err, _ = predict(data, "glue/mrpc", SENTENCE, mrpc_dev, output, capsys)
  assert code == 2 and len(err.strip().splitlines()) == 1 and not output.exists()
  assert "glue_mrpc_model_1 holds no fine-tuned model of glue_mrpc; fine-tune it " \
         "first: python run_finetuning.py --task glue/mrpc --model-name tiny" in err

  config = train(data, "glue/mrpc", SENTENCE)
  # MRPC's dev file has the test layout's 5 columns (its label column is not read).
  code, err, lines = predict(data, "glue/mrpc", SENTENCE, mrpc_dev, output, capsys)
  assert code == 0, err
  _, split, logits, direct = eval_outputs(config, "dev")
  assert len(lines) == len(split.examples) == 48
  probabilities = np.array([[line["probabilities"][label] for label in ("0", "1")]
                            for line in lines])
  np.testing.assert_allclose(probabilities, tf.nn.softmax(logits).numpy(), atol=1e-6)
  np.testing.assert_allclose(probabilities, tf.nn.softmax(direct).numpy(), atol=1e-5)
  assert [line["label"] for line in lines] == [str(k) for k in logits.argmax(-1)]
  assert [line["index"] for line in lines] == list(range(48))

  # STS-B: a test-layout file (the dev rows without their score) gives scores.
  config, _ = shared_glue_models(tmp_path_factory)["glue/stsb"]
  stsb_dev = os.path.join(config.data_dir, "finetuning_data", "STS-B", "dev.tsv")
  rows = open(stsb_dev).read().splitlines()
  unlabeled = tmp_path / "stsb.tsv"
  unlabeled.write_text("".join("\t".join(r.split("\t")[:9]) + "\n" for r in rows))
  code, err, lines = predict(config.data_dir, "glue/stsb", GLUE, unlabeled, output,
                             capsys)
  assert code == 0, err
  finetuner, _, scores, direct = eval_outputs(config, "dev")
  np.testing.assert_allclose([line["score"] for line in lines], scores, atol=1e-6)
  np.testing.assert_allclose(scores, direct, atol=1e-5)
  assert set(lines[0]) == {"index", "score"}

  # A header naming the sentence columns: read by name, whatever the other columns
  # (the labelled dev file), or only those two, no index (lines are numbered). --predict
  # reads every file through the runner's read_unlabeled (finetune/predict.py): the
  # same examples as the test-layout file's give its scores, checked above.
  named = tmp_path / "named.tsv"
  named.write_text("sentence1\tsentence2\n" + "".join(
      "\t".join(r.split("\t")[7:9]) + "\n" for r in rows[1:]))
  read = lambda path: [(e.eid, e.text_a, e.text_b)
                       for e in finetuner.runners[0].read_unlabeled(str(path))]
  assert [eid for eid, _, _ in read(unlabeled)] == list(range(GLUE_DEV_ROWS))
  for path in (stsb_dev, named):
    assert read(path) == read(unlabeled)
  # A header that names neither: the test layout's column count is expected.
  named.write_text("first\tsecond\n" + "".join(
      "\t".join(r.split("\t")[7:9]) + "\n" for r in rows[1:]))
  code, err, _ = predict(config.data_dir, "glue/stsb", GLUE, named, output, capsys)
  assert code == 2 and err.strip() == (
      f"error: {named}:1: the header (first, second) names no column glue/stsb reads; "
      "expected a header row naming 'sentence1' and 'sentence2' (its text columns; other "
      "columns are ignored)")


@pytest.mark.slow
def test_script_streams_predictions_to_stdout(tmp_path, tmp_path_factory, capsys):
  data = shared_glue_models(tmp_path_factory)["glue/sst2"][0].data_dir
  inputs = tmp_path / "sentences.tsv"
  inputs.write_text("index\tsentence\n0\ta gripping , funny film\n1\tdull and long\n")
  run = subprocess.run(
      [sys.executable, os.path.join(ROOT, "run_finetuning.py"), "--task", "sst",
       "--model-name", "tiny", "--data-dir", data, "--hparams", json.dumps(GLUE),
       "--predict", str(inputs)], capture_output=True, text=True)
  assert run.returncode == 0, run.stderr[-2000:]
  lines = [json.loads(line) for line in run.stdout.splitlines()]
  assert [line["index"] for line in lines] == [0, 1]
  for line in lines:
    assert line["label"] in ("0", "1") and set(line["probabilities"]) == {"0", "1"}
    assert sum(line["probabilities"].values()) == pytest.approx(1.0, abs=1e-6)
  assert "predict sentences.tsv 2 " in run.stderr  # the progress line

  # A header naming other columns: refused, not predicted on the column where GLUE's
  # test.tsv has its sentence (here the ids).
  inputs.write_text("text\tid\na gripping , funny film\t0\ndull and long\t1\n")
  capsys.readouterr()  # anything before (the shared model's training, run here or not)
  code, err, _ = predict(data, "glue/sst2", GLUE, inputs, tmp_path / "out.jsonl", capsys)
  assert code == 2 and err == (
      f"error: {inputs}:1: the header (text, id) names no column glue/sst2 reads; "
      "expected a header row naming 'sentence' (its text columns; other columns are "
      "ignored)\n")
  assert not (tmp_path / "out.jsonl").exists()


QA = {"max_seq_length": 128, "doc_stride": 64, "train_batch_size": 16,
      "eval_batch_size": 16, "num_train_epochs": 1.0, "learning_rate": 1e-3}


@pytest.mark.slow
def test_squad_v2_predictions_match_evaluation(tmp_path, capsys):
  with open(shared_path("squad", "dev-v1.1.json"), encoding="utf-8") as f:
    articles = json.load(f)["data"]
  data = tmp_path / "data"
  dev = as_v2(squad_subset(articles[2:3], 4, 3))
  write_json(data / "finetuning_data" / "squad" / "train.json",
        as_v2(squad_subset(articles[:1], 4, 3)))
  write_json(data / "finetuning_data" / "squad" / "dev.json", dev)
  write_tiny_pretrained_model(data)
  config = train(data, "squad/v2.0", QA)
  read = lambda kind: json.load(open(os.path.join(
      config.results_dir, "squad_v2.0_qa", f"squad_v2.0_dev_{kind}.json")))
  answers, null_odds, nbest = read("preds"), read("null_odds"), read("nbest")

  questions = [(q["id"], q["question"], p["context"]) for a in dev["data"]
               for p in a["paragraphs"] for q in p["qas"]]
  lines_file = tmp_path / "questions.jsonl"
  lines_file.write_text("".join(json.dumps({"id": i, "question": q, "context": c}) + "\n"
                                for i, q, c in questions))
  output = tmp_path / "answers.jsonl"
  code, err, lines = predict(data, "squad", QA, lines_file, output, capsys)
  assert code == 0, err
  assert [line["id"] for line in lines] == [i for i, _, _ in questions]
  for line, (qid, _, context) in zip(lines, questions):
    assert line["answer"] == answers[qid]
    assert line["no_answer_score"] == pytest.approx(null_odds[qid], abs=1e-5)
    assert line["no_answer"] == (null_odds[qid] > config.sections["qa"].qa_na_threshold)
    assert line["probability"] == pytest.approx(next(
        e["probability"] for e in nbest[qid] if e["text"] == answers[qid]), abs=1e-6)
    # The span is where the answer sits in the context, whitespace as the words join.
    assert line["answer"]
    assert " ".join(context[line["start"]:line["end"]].split()) == line["answer"]
  # The SQuAD JSON document itself (its answers not read) gives the same lines.
  code, err, again = predict(data, "squad", QA,
                             data / "finetuning_data" / "squad" / "dev.json", output,
                             capsys)
  assert code == 0, err
  assert again == lines

  bad = tmp_path / "bad.jsonl"
  bad.write_text(json.dumps({"question": "Who?", "text": "no context"}) + "\n")
  code, err, _ = predict(data, "squad", QA, bad, output, capsys)
  assert code == 2 and err.strip() == f'error: {bad}:1: no "context" text'


@pytest.mark.slow
def test_chunking_predictions_match_evaluation(tmp_path, tmp_path_factory, capsys):
  # max_seq_length 24: the longer sentences are read in several windows.
  config = shared_chunk_model(tmp_path_factory)
  task = tasks.get_task("chunk")
  sentences = tagging_data.read_file(
      task, os.path.join(config.data_dir, "finetuning_data", "chunk", "test.txt"))
  inputs = tmp_path / "sentences.txt"
  inputs.write_text("".join(" ".join(s.words) + "\n\n" for s in sentences))
  output = tmp_path / "tags.jsonl"
  code, err, lines = predict(config.data_dir, "chunk", CHUNK, inputs, output, capsys)
  assert code == 0, err
  _, split, outputs, _ = eval_outputs(config, "test")
  expected = tagging_data.predicted_tags(split.examples, split.features, outputs,
                                         task.output_tags)
  assert len(lines) == len(sentences) == 24
  assert len(split.features["input_ids"]) > len(sentences)  # several windows
  for line, sentence, tags in zip(lines, sentences, expected):
    assert line["words"] == list(sentence.words)
    assert len(line["tags"]) == len(sentence.words) and line["tags"] == tags
    assert set(line["tags"]) <= set(task.tags)
    # Chunks as entities: each a span of the line, as conlleval reads the tags.
    text = " ".join(sentence.words)
    starts = [len(" ".join(sentence.words[:i])) + (i > 0) for i in range(len(sentence.words))]
    assert [(e["type"], e["start"], e["end"], e["text"]) for e in line["entities"]] == [
        (kind, starts[a], starts[b] + len(sentence.words[b]),
         " ".join(sentence.words[a:b + 1]))
        for kind, a, b in tagging_metrics.entity_spans(tags)]
    assert all(text[e["start"]:e["end"]] == e["text"] for e in line["entities"])
