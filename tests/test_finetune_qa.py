"""Question answering fine-tuning: windows on the shared SQuAD dev set, post-processing on
hand-built cases, the span head against NumPy, and end-to-end SQuAD 1.1 + 2.0 runs."""

import json
import logging
import os
import re
import string

import numpy as np
import pytest
import scipy.special
import tensorflow as tf
import tf_keras

from data_prep.tokenizer import Tokenizer
from data_prep.vocab import Vocab, load_vocab
from finetune import config as finetune_config
from finetune import tasks
from finetune import windows
from finetune.qa import data as qa_data
from finetune.qa import model as qa_model
from finetune.qa import deployed as qa_deployed
from finetune.qa import squad_metrics
from finetune import trainer
from finetune.errors import DataError
from tests.helpers import (as_v2, shared_path, squad_subset, write_json,
                           write_tiny_pretrained_model)


def normalized(answer: str) -> str:
  """SQuAD's comparison form: lowercase, no punctuation, articles or extra spaces."""
  answer = "".join(ch for ch in answer.lower() if ch not in string.punctuation)
  return " ".join(re.sub(r"\b(a|an|the)\b", " ", answer).split())


@pytest.fixture(scope="module")
def bert_tokenizer():
  return Tokenizer(load_vocab(shared_path("vocab", "bert_uncased_vocab.txt")))


def test_windows_recover_every_shared_dev_answer(bert_tokenizer):
  tokenizer, tokens = bert_tokenizer, bert_tokenizer.vocab.tokens
  examples = qa_data.read_file(tasks.get_task("squad/v1.1"),
                          shared_path("squad", "dev-v1.1.json"))
  length, stride = 256, 128
  windows = qa_data.featurize(tokenizer, examples, length, 64, stride)
  ids, mask, segments = (windows.arrays[k] for k in ("input_ids", "input_mask",
                                                     "segment_ids"))
  # Context pieces: the whole context tokenized at once, cut into the windows.
  context_ids, offsets = tokenizer.batch_ids([e.context.replace("\n", " ")
                                             for e in examples])
  owners = np.zeros(len(context_ids), int)
  recovered, sub_piece = {}, []
  for w, index in enumerate(windows.example_index):
    example = examples[index]
    # Windows start every `stride` pieces (each holds more than `stride` here).
    first = 0 if w == 0 or windows.example_index[w - 1] != index else first + stride
    context = context_ids[offsets[index]:offsets[index + 1]]
    in_context = (segments[w] == 1) & (mask[w] == 1)
    in_context[mask[w].sum() - 1] = False  # the closing [SEP]
    pieces = ids[w][in_context]
    assert pieces.tolist() == context[first:first + len(pieces)].tolist()
    assert (windows.token_to_word[w] >= 0).tolist() == in_context.tolist()
    owners[offsets[index] + first + np.flatnonzero(windows.max_context[w][in_context])] += 1
    start, end = windows.arrays["start_positions"][w], windows.arrays["end_positions"][w]
    if start == 0:
      continue
    to_word = windows.token_to_word[w]
    text = final_text(
        qa_deployed.piece_text([tokens[i] for i in ids[w, start:end + 1]]),
        " ".join(example.doc_tokens[to_word[start]:to_word[end] + 1]))
    gold = example.answers[0].text
    recovered[example.qid] = text
    if tokenizer.ids(gold) == ids[w, start:end + 1].tolist():
      assert normalized(text) == normalized(gold), (example.qid, text, gold)
    else:
      # The gold answer is part of a word piece ("Japan" in "Japanese"): the pieces
      # cannot express it and the span covers the whole piece, as in the original.
      assert normalized(gold) in normalized(text)
      sub_piece.append(example.qid)
  # Every piece is scored in exactly one window; every answer fits some window here.
  assert owners.tolist() == [1] * len(context_ids)
  assert set(recovered) == {e.qid for e in examples}
  assert len(sub_piece) < 0.005 * len(examples)


def small_tokenizer():
  words = ("the man went to store and bought a gallon of milk who what where when did "
           "buy , . ' s").split()
  return Tokenizer(Vocab(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words +
                         ["##s"]))


def example(qid, question, context, answer=None, eid=0, impossible=False):
  words, char_to_word = qa_data.split_words(context)
  answers = ()
  if answer:
    start = context.index(answer)
    answers = (qa_data.Answer(answer, start, char_to_word[start],
                         char_to_word[start + len(answer) - 1]),)
  return qa_data.QAExample(eid, qid, question, context, words, answers,
                      tuple(a.text for a in answers), impossible)


def test_doc_spans_and_max_context_follow_the_original_example():
  # The original's comment: "bought" (piece 7) has the most context in span C.
  spans = windows.doc_spans(12, 5, 3)
  assert spans == [(0, 5), (3, 5), (6, 5), (9, 3)]
  owner = windows.max_context_owner(spans, 12)
  assert owner[7] == 2
  # By hand: piece 3 has min(3, 1) in span A, min(0, 4) in B; piece 9 min(3, 1) in C.
  assert owner.tolist() == [0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3]
  assert windows.doc_spans(0, 5, 3) == [(0, 0)]


def test_answer_span_is_tightened_to_the_answer_pieces():
  tokenizer = small_tokenizer()
  context = "the man went to the store, and bought milk."
  windows = qa_data.featurize(tokenizer, [example("q", "where", context, "store")],
                                  32, 8, 16)
  start, end = windows.arrays["start_positions"][0], windows.arrays["end_positions"][0]
  # The word is "store," but the answer's own pieces are just "store".
  assert [tokenizer.vocab.tokens[i] for i in windows.arrays["input_ids"][0, start:end + 1]
          ] == ["store"]
  assert windows.token_to_word[0, start] == context.split().index("store,")


def test_windows_without_the_answer_point_at_cls():
  tokenizer = small_tokenizer()
  context = "the man went to the store and bought a gallon of milk"
  windows = qa_data.featurize(
      tokenizer, [example("q", "what did the man buy", context, "milk"),
                  example("n", "who", context, eid=1, impossible=True)], 12, 8, 2)
  rows = windows.example_index == 0
  starts = windows.arrays["start_positions"][rows]
  # Only windows that hold "milk" (the last piece) point at it; the rest at [CLS].
  holds = [(windows.token_to_word[w] == 11).any() for w in np.flatnonzero(rows)]
  assert (starts > 0).tolist() == holds and any(holds) and not all(holds)
  assert not windows.arrays["start_positions"][~rows].any()
  assert windows.arrays["is_impossible"].tolist() == (~rows).astype(int).tolist()


def test_a_question_too_long_for_the_window_names_the_example():
  with pytest.raises(DataError, match="question long-q: 8 question pieces leave no room"):
    qa_data.featurize(small_tokenizer(), [
        example("long-q", "the man went to the store and bought", "milk")], 11, 8, 4)


def final_text(pred_text, orig_text):
  start, end = qa_deployed.final_span(pred_text, orig_text)
  return orig_text[start:end]


def test_final_span():
  assert final_text("steve smith", "Steve Smith's") == "Steve Smith"
  assert final_text("1895", "(1895-1943).") == "1895"
  assert final_text("cafe", "Café,") == "Café"
  # Zero-width characters dropped by BERT still align.
  assert final_text("model", "model\u200b\u200bmany") == "model"
  # Not found, or no character alignment: the whole original text.
  assert final_text("xyz", "Steve Smith's") == "Steve Smith's"
  # An accent written as a combining mark: no character alignment.
  assert final_text("ete", "e\u0301te\u0301s") == "e\u0301te\u0301s"


def plain_outputs(windows, scores):
  """Independent start/end logits: -10 everywhere, then {(window, position): (s, e)}."""
  n, length = windows.arrays["input_ids"].shape
  start, end = np.full([n, length], -10.0), np.full([n, length], -10.0)
  for (w, position), (s, e) in scores.items():
    if s is not None:
      start[w, position] = s
    if e is not None:
      end[w, position] = e
  return {"start_logits": start, "end_logits": end}


def position(windows, w, word):
  return int(np.flatnonzero(windows.token_to_word[w] == word)[0])


def predict(windows, examples, outputs, **kwargs):
  settings = dict(n_best_size=3, max_answer_length=4, v2=False,
                  answerable_classifier=False, lower_case=True)
  settings.update(kwargs)
  return qa_deployed.predict_answers(examples, windows, outputs,
                                        small_tokenizer().vocab.tokens, **settings)


def test_nbest_ordering_length_limit_and_invalid_spans():
  context = "The man went to the store and bought a gallon of milk."
  examples = [example("q", "what did the man buy", context)]
  windows = qa_data.featurize(small_tokenizer(), examples, 64, 16, 32)
  at = lambda word: position(windows, 0, word)
  outputs = plain_outputs(windows, {
      (0, at(1)): (9.0, None),     # start "man"
      (0, 1): (8.5, 8.5),          # a question piece: never part of an answer
      (0, at(8)): (5.0, None),     # start "a"
      (0, at(9)): (4.0, None),     # start "gallon"
      (0, at(5)): (None, 9.5),     # end "store": "man ... store" has 5 pieces
      (0, at(0)): (None, 7.0),     # end "The": before every start
      (0, at(10)): (None, 6.0),    # end "of"
      (0, at(2)): (None, 2.0),     # end "went"
  })
  result = predict(windows, examples, outputs, n_best_size=5)
  nbest = result.nbest["q"]
  assert [e["text"] for e in nbest] == ["man went", "a gallon of", "gallon of"]
  totals = [e["start_logit"] + e["end_logit"] for e in nbest]
  assert totals == [11.0, 11.0, 10.0]  # a tie keeps the original's candidate order
  probabilities = np.exp(totals) / np.exp(totals).sum()
  assert [e["probability"] for e in nbest] == pytest.approx(probabilities.tolist())
  assert result.answers == {"q": "man went"}
  # n_best_size also bounds each side's candidates: "went" is the fifth best end.
  assert [e["text"] for e in predict(windows, examples, outputs,
                                     n_best_size=4).nbest["q"]] == ["a gallon of",
                                                                    "gallon of"]
  # A longer limit admits the best pair; the original text keeps its capital.
  longer = predict(windows, examples, outputs, n_best_size=5, max_answer_length=30)
  assert longer.answers["q"] == "man went to the store"
  outputs["start_logits"][0, at(0)] = 9.9
  assert predict(windows, examples, outputs, n_best_size=5, max_answer_length=30
                 ).answers["q"] == "The man went to the store"


def test_span_from_the_window_with_most_context():
  context = "the man went to the store and bought a gallon of milk"
  examples = [example("q", "who", context)]
  windows = qa_data.featurize(small_tokenizer(), examples, 9, 4, 3)
  # "bought" (word 7) is in windows 1 and 2; window 2 gives it the most context.
  holding = [w for w in range(len(windows.example_index))
             if (windows.token_to_word[w] == 7).any()]
  assert holding == [1, 2]
  assert not windows.max_context[1, position(windows, 1, 7)]
  assert windows.max_context[2, position(windows, 2, 7)]
  scores = {(1, position(windows, 1, 7)): (9.0, 9.0),  # best, but not max context
            (2, position(windows, 2, 7)): (1.0, 1.0),
            (0, position(windows, 0, 1)): (0.5, 0.5)}
  result = predict(windows, examples, plain_outputs(windows, scores))
  assert [e["text"] for e in result.nbest["q"]] == ["bought", "man"]
  # No valid span at all: the original's placeholder.
  empty = predict(windows, examples, plain_outputs(windows, {}), max_answer_length=0)
  assert empty.answers == {"q": "empty"}


def test_joint_outputs_and_null_odds():
  context = "the man went to the store and bought a gallon of milk"
  examples = [example("q", "who", context), example("r", "who", context, eid=1)]
  windows = qa_data.featurize(small_tokenizer(), examples, 9, 4, 3)
  n = len(windows.example_index)
  q_windows = np.flatnonzero(windows.example_index == 0)
  at = lambda w, word: position(windows, w, word)
  beam = 2
  outputs = {"start_top_index": np.zeros([n, beam], int),
             "start_top_log_probs": np.full([n, beam], -9.0),
             "end_top_index": np.zeros([n, beam, beam], int),
             "end_top_log_probs": np.full([n, beam, beam], -9.0),
             "start_logits": np.zeros([n, 9]),
             "answerable_logit": np.arange(n, dtype=float)}
  last = q_windows[-1]  # "of milk" has the most context in q's last window
  outputs["start_top_index"][last] = [at(last, 10), at(last, 11)]
  outputs["start_top_log_probs"][last] = [-0.5, -1.0]
  outputs["end_top_index"][last] = [[at(last, 11), at(last, 10)],
                                    [at(last, 11), at(last, 11)]]
  outputs["end_top_log_probs"][last] = [[-0.1, -2.0], [-0.2, -0.3]]
  result = predict(windows, examples, outputs, v2=True, answerable_classifier=True)
  # Ranked by start + end log-probability; the second "milk" is a duplicate.
  assert [e["text"] for e in result.nbest["q"]] == ["of milk", "milk", "of"]
  assert [e["start_logit"] for e in result.nbest["q"]] == [-0.5, -1.0, -0.5]
  assert result.answers["r"] == "empty"
  # The null score is the smallest answerability logit over the question's windows.
  assert result.null_odds["q"] == float(q_windows[0])
  assert result.null_odds["r"] == float(np.flatnonzero(windows.example_index == 1)[0])
  assert qa_deployed.thresholded(result, result.null_odds["r"] - 0.5) == {
      "q": "of milk", "r": ""}


def test_joint_head_matches_a_numpy_reference():
  rng = np.random.default_rng(0)
  batch_size, length, hidden, beam = 2, 7, 6, 3
  sequence = rng.normal(size=[batch_size, length, hidden]).astype(np.float32)
  batch = {"input_mask": np.array([[1] * 7, [1] * 5 + [0] * 2], np.int32),
           "segment_ids": np.array([[0, 0, 0, 1, 1, 1, 1], [0, 0, 1, 1, 1, 0, 0]],
                                   np.int32),
           "start_positions": np.array([4, 0], np.int32),
           "end_positions": np.array([5, 0], np.int32),
           "is_impossible": np.array([0, 1], np.int32)}
  head = qa_model.SpanHead(beam_size=beam)
  inference = {k: v.numpy() for k, v in head(sequence, batch, training=False).items()}
  training = {k: v.numpy() for k, v in head(sequence, batch, training=True).items()}
  weights = {w.name.split("/", 1)[1]: w.numpy() for w in head.weights}

  gelu = lambda x: 0.5 * x * (1 + scipy.special.erf(x / np.sqrt(2)))
  allowed = batch["input_mask"] * batch["segment_ids"]
  allowed[:, 0] = 1
  penalty = 1000.0 * (allowed - 1)
  start = sequence @ weights["start_logits/kernel:0"][:, 0] + \
      weights["start_logits/bias:0"][0] + penalty
  np.testing.assert_allclose(inference["start_logits"], start, rtol=1e-5, atol=1e-4)

  def end_logits(b, s):
    pairs = np.concatenate([np.repeat(sequence[b, s][None], length, 0), sequence[b]], -1)
    h = gelu(pairs @ weights["qa_hidden/kernel:0"] + weights["qa_hidden/bias:0"])
    return h @ weights["qa_logits/kernel:0"][:, 0] + weights["qa_logits/bias:0"][0] + \
        penalty[b]

  log_softmax = lambda x: x - np.log(np.exp(x - x.max()).sum()) - x.max()
  for b in range(batch_size):
    np.testing.assert_allclose(training["end_logits"][b],
                               end_logits(b, batch["start_positions"][b]), rtol=1e-4,
                               atol=1e-3)
    top = np.argsort(-log_softmax(start[b]), kind="stable")[:beam]
    assert inference["start_top_index"][b].tolist() == top.tolist()
    for k, s in enumerate(top):
      ends = log_softmax(end_logits(b, s))
      assert inference["end_top_index"][b, k].tolist() == np.argsort(
          -ends, kind="stable")[:beam].tolist()
      np.testing.assert_allclose(inference["end_top_log_probs"][b, k],
                                 np.sort(ends)[::-1][:beam], rtol=1e-4, atol=1e-4)
  # Masked positions never start an answer; [CLS] may.
  assert (inference["start_top_index"][1] < 5).all()
  # The loss: mean start/end cross-entropy plus half the answerability loss.
  loss = qa_model.span_loss(training, batch, 0.5).numpy()
  softmax_ce = lambda logits, i: -log_softmax(logits)[i]
  p = 1 / (1 + np.exp(-training["answerable_logit"]))
  expected = [(softmax_ce(training["start_logits"][b], batch["start_positions"][b]) +
               softmax_ce(training["end_logits"][b], batch["end_positions"][b])) / 2 -
              0.5 * (batch["is_impossible"][b] * np.log(p[b]) +
                     (1 - batch["is_impossible"][b]) * np.log(1 - p[b]))
              for b in range(batch_size)]
  np.testing.assert_allclose(loss, expected, rtol=1e-4)
  # Independent start and end logits (joint_prediction false) are masked the same way.
  plain = qa_model.SpanHead(joint_prediction=False, answerable_classifier=False)
  out = plain(sequence, batch, training=False)
  assert set(out) == {"start_logits", "end_logits"}
  assert (out["end_logits"].numpy()[allowed == 0] < -500).all()


def test_mrqa_runner_scores_against_every_listed_answer(tmp_path):
  context = "the man went to the store and bought a gallon of milk ."
  span = lambda text: [[context.index(text), context.index(text) + len(text) - 1]]
  lines = [{"header": {"dataset": "NewsQA"}}, {"context": context, "qas": [
      {"qid": "m1", "question": "what did the man buy", "answers": ["milk", "a gallon"],
       "detected_answers": [{"text": "milk", "char_spans": span("milk")}]},
      {"qid": "m2", "question": "where", "answers": ["the store"],
       "detected_answers": [{"text": "the store", "char_spans": span("the store")}]}]}]
  path = tmp_path / "finetuning_data" / "newsqa" / "dev.jsonl"
  path.parent.mkdir(parents=True)
  path.write_text("\n".join(json.dumps(line) for line in lines))
  task = tasks.get_task("newsqa")
  config = finetune_config.load_config("tiny", ["newsqa"], str(tmp_path),
                                       {"max_seq_length": 16, "doc_stride": 8})
  runner = tasks.runner_for(task, config, small_tokenizer())
  examples = tasks.read_examples(task, str(tmp_path), "dev")
  features = runner.features(examples, "dev")
  windows = runner.windows(examples, features, "dev")
  assert len(windows.example_index) == 4  # each question has two windows
  # Logits on "a gallon" (m1) and "store" (m2) where those words have the most context.
  outputs = plain_outputs(windows, {})
  for qid, first, last in (("m1", 8, 9), ("m2", 5, 5)):
    w = next(v for v, i in enumerate(windows.example_index) if examples[i].qid == qid and
             windows.max_context[v, windows.token_to_word[v] == first].any())
    outputs["start_logits"][w, position(windows, w, first)] = 5.0
    outputs["end_logits"][w, position(windows, w, last)] = 5.0
  result = runner.score(examples, features, outputs, "dev")
  # "a gallon" is the second listed answer of m1; "store" misses "the" (an article).
  assert result == {"exact_match": 100.0, "f1": 100.0}
  predictions = json.load(open(runner.output_file("dev", "preds")))
  assert predictions == {"m1": "a gallon", "m2": "store"}
  assert runner.output_file("dev", "preds").endswith(
      os.path.join("results", "mrqa_news_qa_qa", "mrqa_news_qa_dev_preds.json"))


def test_span_head_logits_are_float32_under_mixed_precision():
  rng = np.random.default_rng(1)
  sequence = tf.constant(rng.normal(size=[2, 8, 4]), tf.float16)
  batch = {"input_mask": np.ones([2, 8], np.int32),
           "segment_ids": np.array([[0] * 3 + [1] * 5] * 2, np.int32),
           "start_positions": np.array([4, 0], np.int32)}
  tf_keras.mixed_precision.set_global_policy("mixed_float16")
  try:
    head = qa_model.SpanHead(beam_size=4)
    for training in (True, False):
      outputs = head(sequence, batch, training=training)
      assert {k: v.dtype for k, v in outputs.items() if "index" not in k} == {
          k: tf.float32 for k in outputs if "index" not in k}
      assert np.isfinite(outputs["start_logits"].numpy()).all()
  finally:
    tf_keras.mixed_precision.set_global_policy("float32")


# ---- end to end -------------------------------------------------------------------


@pytest.mark.slow
def test_squad_v1_and_v2_train_together_and_write_every_output(tmp_path, caplog):
  with open(shared_path("squad", "dev-v1.1.json"), encoding="utf-8") as f:
    articles = json.load(f)["data"]
  # Train on two articles, evaluate on a third one.
  train = squad_subset(articles[:2], 4, 3)
  dev = squad_subset(articles[2:3], 4, 3)
  # A training answer not at its offset: left out of training, reported.
  train["data"][0]["paragraphs"][0]["qas"][0]["answers"] = [
      {"text": "no such answer", "answer_start": 0}]
  data = tmp_path / "data"
  root = data / "finetuning_data"
  write_json(root / "squadv1" / "train.json", train)
  write_json(root / "squadv1" / "dev.json", dev)
  write_json(root / "squad" / "train.json", as_v2(train))
  write_json(root / "squad" / "dev.json", as_v2(dev))
  # The dev questions again without their answers, as a test set.
  test = as_v2(dev)
  for paragraph in (p for a in test["data"] for p in a["paragraphs"]):
    for question in paragraph["qas"]:
      question.update(answers=[], is_impossible=False)
  write_json(root / "squad" / "test.json", test)
  write_tiny_pretrained_model(data)
  overrides = {"max_seq_length": 128, "doc_stride": 64, "train_batch_size": 16,
               "eval_batch_size": 16, "num_train_epochs": 1.0, "learning_rate": 1e-3,
               "write_test_outputs": True, "export_serving": False,  # test_serving's
               "write_curves": False}
  config = finetune_config.load_config("tiny", ["squad/v1.1", "squad/v2.0"], str(data),
                                       overrides)
  with caplog.at_level(logging.WARNING):
    report = trainer.run(config, log=lambda _: None)
  assert ("squad/v1.1 train: 1 gold answers are not at their answer_start (first: "
          f"{root / 'squadv1' / 'train.json'}: article 0 paragraph 0 question "
          f"{train['data'][0]['paragraphs'][0]['qas'][0]['id']}: answer 'no such answer' "
          f"at 0, where the context reads {train['data'][0]['paragraphs'][0]['context'][:14]!r}"
          "); 1 questions left without one are left out of training") in caplog.text
  summary = {k: v["median"] for k, v in report["summary"].items()}
  assert set(summary) == {"squad/v1.1 dev exact_match", "squad/v1.1 dev f1",
                          "squad/v2.0 dev exact_match", "squad/v2.0 dev f1",
                          "squad/v2.0 dev best_exact_match", "squad/v2.0 dev best_f1"}

  out = os.path.join(config.results_dir, "squad_v1.1,squad_v2.0_qa")
  qa_settings = config.sections["qa"]
  read = lambda name: json.load(open(os.path.join(out, name), encoding="utf-8"))
  contexts = {q["id"]: p["context"] for a in as_v2(dev)["data"]
              for p in a["paragraphs"] for q in p["qas"]}
  for task, document in (("squad_v1.1", dev), ("squad_v2.0", as_v2(dev))):
    predictions = read(f"{task}_dev_preds.json")
    nbest = read(f"{task}_dev_nbest.json")
    assert set(predictions) == set(nbest) == {
        q["id"] for a in document["data"] for p in a["paragraphs"] for q in p["qas"]}
    for qid, answer in predictions.items():
      # Words of the context (joined by single spaces, as the words are).
      assert answer and answer in " ".join(contexts[qid].split())
      assert nbest[qid][0]["text"] == answer and len(nbest[qid]) <= qa_settings.n_best_size
      assert sum(e["probability"] for e in nbest[qid]) == pytest.approx(1.0)
      totals = [e["start_logit"] + e["end_logit"] for e in nbest[qid]]
      assert totals == sorted(totals, reverse=True)
    # The reported scores are the official evaluation of the written files.
    if task == "squad_v1.1":
      expected = squad_metrics.evaluate_v1(document["data"], predictions)
    else:
      null_odds = read(f"{task}_dev_null_odds.json")
      expected = squad_metrics.evaluate_v2(document["data"], predictions, null_odds,
                                           qa_settings.qa_na_threshold)
      assert read(f"{task}_dev_eval.json")["best_f1_thresh"] == expected["best_f1_thresh"]
      assert summary["squad/v2.0 dev best_f1"] == pytest.approx(expected["best_f1"])
      assert read(f"{task}_dev_preds_thresholded.json") == {
          qid: "" if null_odds[qid] > expected["best_f1_thresh"] else text
          for qid, text in predictions.items()}
    name = task.replace("_", "/")
    assert summary[f"{name} dev exact_match"] == pytest.approx(expected["exact_match"])
    assert summary[f"{name} dev f1"] == pytest.approx(expected["f1"])
  # Test answers: the same questions' dev answers, "" where the null odds pass the
  # configured threshold (SQuAD 2.0 only, as the original).
  dev_answers = read("squad_v2.0_dev_preds.json")
  null_odds = read("squad_v2.0_dev_null_odds.json")
  test_dir = os.path.join(config.results_dir, "test_predictions",
                          "squad_v1.1,squad_v2.0_trial1")
  assert os.listdir(test_dir) == ["squad_v2.0_test_preds.json"]
  assert json.load(open(os.path.join(test_dir, "squad_v2.0_test_preds.json"))) == {
      qid: "" if null_odds[qid] > qa_settings.qa_na_threshold else text
      for qid, text in dev_answers.items()}


def test_squad_answers_all_off_their_offsets_are_named_as_the_cause(tmp_path, capsys):
  import run_finetuning  # pylint: disable=g-import-not-at-top
  with open(shared_path("squad", "dev-v1.1.json"), encoding="utf-8") as f:
    articles = json.load(f)["data"]
  train = squad_subset(articles[:1], 2, 3)
  for paragraph in (p for a in train["data"] for p in a["paragraphs"]):
    for question in paragraph["qas"]:
      for answer in question["answers"]:
        answer["answer_start"] += 3  # every offset off by three characters
  data = tmp_path / "data"
  write_json(data / "finetuning_data" / "squadv1" / "train.json", train)
  write_json(data / "finetuning_data" / "squadv1" / "dev.json", squad_subset(articles[1:2], 1, 2))
  write_tiny_pretrained_model(data)
  paragraph = train["data"][0]["paragraphs"][0]
  first, context = paragraph["qas"][0], paragraph["context"]
  answer, start = first["answers"][0]["text"], first["answers"][0]["answer_start"]
  assert run_finetuning.main(["--task", "squad/v1.1", "--model-name", "tiny", "--data-dir",
                              str(data), "--hparams", '{"max_seq_length": 128}']) == 2
  assert capsys.readouterr().err.splitlines()[-1] == (
      "error: squad/v1.1 train: none of its 6 answerable questions has a gold answer whose "
      f"text is in the context at its answer_start (first: "
      f"{data / 'finetuning_data' / 'squadv1' / 'train.json'}: article 0 paragraph 0 "
      f"question {first['id']}: answer {answer!r} at {start}, where the context reads "
      f"{context[start:start + len(answer)]!r}); answer_start must be the answer's first "
      "character in the context, counted from 0")
