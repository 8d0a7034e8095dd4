"""The serving SavedModel: its in-graph tokenizer gives data_prep's ids on the tokenizer
parity tests' inputs, its QA answer alignment gives get_final_text's spans, and loaded
in a clean subprocess (tensorflow and tensorflow_text only) it predicts what the Keras
model (and for QA, --predict) predicts on the same strings."""

import dataclasses
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from data_prep.tokenizer import Tokenizer
from data_prep.vocab import load_vocab
from finetune import config as finetune_config
from finetune import graph_tokenizer, serving, tasks, trainer
from finetune.qa import data as qa_data
from finetune.qa import deployed as qa_deployed
from finetune.qa import serving as qa_serving
from finetune.tagging import data as tagging_data
from tests.export_helpers import (ODD_CONTEXT, TRANSFORMERS_QA_HEAD,
                                   call_in_clean_process, predict_questions,
                                   shared_chunk_model, shared_squad_model)
from tests.helpers import (ADVERSARIAL, code_point_lines, head_of, shared_path,
                           write_tiny_pretrained_model)


@pytest.mark.parametrize("lower_case", [True, False])
def test_graph_tokenizer_gives_data_prep_ids(lower_case):
  vocab = load_vocab(shared_path("vocab", "bert_uncased_vocab.txt"))
  with open(shared_path("corpus", "english_corpus.txt"), encoding="utf-8") as f:
    corpus = f.read().split("\n")[:3000]
  lines = ADVERSARIAL + code_point_lines() + corpus
  graph = graph_tokenizer.GraphTokenizer(vocab.tokens, lower_case, lower_case)
  got = graph(tf.constant(lines))
  ids, offsets = Tokenizer(vocab, lower_case, lower_case).batch_ids(lines)
  for i, (line, row) in enumerate(zip(lines, got.to_list())):
    assert row == ids[offsets[i]:offsets[i + 1]].tolist(), f"line {i}: {line[:80]!r}"
  # Invalid UTF-8 counts as U+FFFD, which BERT drops (as data_prep's readers' do).
  raw = "naïve café".encode() + b"\xff\xc3 ok"
  assert graph(tf.constant([raw])).to_list()[0] == Tokenizer(
      vocab, lower_case, lower_case).ids(raw.decode("utf-8", errors="replace"))
  if lower_case:  # the documented exception: NFD sorts adjacent combining spacing marks
    text = "a\U0001d16d\U0001d165"
    assert graph.normalize(tf.constant([text])).numpy()[0].decode() == text
    assert Tokenizer(vocab).normalize(text).decode() == "a\U0001d165\U0001d16d"


@pytest.mark.parametrize("lower_case", [True, False])
def test_graph_answer_alignment_is_get_final_text(lower_case):
  """Every span of up to 8 pieces of the odd context and of a SQuAD paragraph: the
  graph's [start, end) in the words joined by spaces is final_span's."""
  vocab = load_vocab(shared_path("vocab", "bert_uncased_vocab.txt"))
  with open(shared_path("squad", "dev-v1.1.json"), encoding="utf-8") as f:
    paragraph = json.load(f)["data"][0]["paragraphs"][0]["context"]
  tokenizer = Tokenizer(vocab, lower_case, lower_case)
  orig_texts, pred_texts, want = [], [], []
  for context in (ODD_CONTEXT, paragraph):
    words, _ = qa_data.split_words(context)
    pieces = [(w, vocab.tokens[i]) for w, word in enumerate(words)
              for i in tokenizer.ids(word)]
    for a, b in ((a, b) for a in range(len(pieces))
                 for b in range(a, min(a + 8, len(pieces)))):
      pred_texts.append(qa_deployed.piece_text([t for _, t in pieces[a:b + 1]]))
      orig_texts.append(" ".join(words[pieces[a][0]:pieces[b][0] + 1]))
      want.append(qa_deployed.final_span(pred_texts[-1], orig_texts[-1], lower_case))
  graph = graph_tokenizer.GraphTokenizer(vocab.tokens, lower_case, lower_case)
  start, end = qa_serving.final_spans(graph, tf.constant(orig_texts), tf.constant(pred_texts))
  assert list(zip(start.numpy().tolist(), end.numpy().tolist())) == want
  # Both ways of final_span occur: trimmed inside words and whole (e.g. an [UNK]).
  assert sum(span != (0, len(text)) for span, text in zip(want, orig_texts)) > 100
  assert sum(span == (0, len(text)) for span, text in zip(want, orig_texts)) > 100


def keras_outputs(config, split, count=1):
  """(the split, the restored Keras model's outputs on it) of each of the run's first
  `count` tasks, every batch padded to max_seq_length: the exports, which run at the
  input's length, must give the same."""
  finetuner = trainer.Finetuner(dataclasses.replace(config, batch_length_multiple=0),
                                log=lambda _: None)
  model = finetuner.build_model()
  finetuner.restore(model, 1)
  return [finetuner.outputs(model, index, split) for index in range(count)]


@pytest.mark.slow
def test_sentence_pair_single_and_regression_export(tmp_path):
  data = tmp_path / "data"
  for folder in ("MRPC", "STS-B", "SST-2"):
    for split in ("train", "dev"):
      head_of(shared_path("glue", folder, f"{split}.tsv"),
              data / "finetuning_data" / folder / f"{split}.tsv", 33)
  write_tiny_pretrained_model(data, layers=1)
  # Short sequences: the pair truncation is exercised on most rows.
  config = finetune_config.load_config(
      "tiny", ["glue/mrpc", "glue/stsb", "glue/sst2"], str(data),
      {"train_batch_size": 16, "eval_batch_size": 32, "max_seq_length": 24,
       "num_train_epochs": 1.0})
  trainer.run(config, log=lambda _: None)
  path = os.path.join(f"{config.model_dir}_1", serving.SAVED_MODEL)
  assert os.path.isdir(path) and not [
      name for name in os.listdir(f"{config.model_dir}_1") if name.startswith(".")]
  (mrpc, mrpc_logits), (stsb, stsb_scores), (sst2, sst2_logits) = keras_outputs(
      config, "dev", 3)
  pairs = lambda split: {"text_a": [e.text_a for e in split.examples],
                         "text_b": [e.text_b for e in split.examples]}
  [out] = call_in_clean_process({
      "path": path, "serving_default": pairs(mrpc), "glue_stsb": pairs(stsb),
      "glue_sst2": {"text_a": [e.text_a for e in sst2.examples]}})
  probabilities = tf.nn.softmax(mrpc_logits).numpy()
  assert len(out["serving_default"]["probabilities"]) == len(mrpc.examples) == 32
  np.testing.assert_allclose(out["serving_default"]["probabilities"], probabilities,
                             atol=1e-5)
  assert out["serving_default"]["label"] == [str(k) for k in probabilities.argmax(-1)]
  np.testing.assert_allclose(out["glue_stsb"]["score"], stsb_scores, atol=1e-5)
  np.testing.assert_allclose(out["glue_sst2"]["probabilities"],
                             tf.nn.softmax(sst2_logits).numpy(), atol=1e-5)


@pytest.mark.slow
def test_tagging_export(tmp_path_factory):
  config = shared_chunk_model(tmp_path_factory)
  [(split, logits)] = keras_outputs(config, "test")
  task = tasks.get_task("chunk")
  want = tagging_data.predicted_tags(split.examples, split.features, logits,
                                     task.output_tags)
  # Some sentences span several (overlapping) windows.
  assert len(set(split.features["sentence_index"])) < len(split.features["input_ids"])
  text = {"text": ["  ".join(e.words) for e in split.examples]}
  path = os.path.join(f"{config.model_dir}_1", serving.SAVED_MODEL)
  [out] = call_in_clean_process({"path": path, "serving_default": text})
  width = max(map(len, want))
  assert out["serving_default"]["tag"] == [t for tags in want
                                           for t in tags + [""] * (width - len(tags))]
  assert set(out["serving_default"]["tag"]) <= set(task.tags) | {""}


def qa_questions(articles):
  questions = [(q["question"], p["context"]) for p in articles[2]["paragraphs"][:3]
               for q in p["qas"][:2]]
  return questions + [("Who was born in (1895-1943)?", ODD_CONTEXT),
                      # Separators of split_words (tab, U+202F, line breaks); a question
                      # cut.
                      (" ".join(["why"] * 30), "\tTabs\tand\u202fnarrow  spaces,\r\nline "
                       "one of two; a short context."),
                      ("What\x1cis\u3000it?", "It is 42."),
                      # Chinese, without spaces: each CJK character a word, "中国"
                      # twice (the answer's place is the one its pieces are at).
                      ("文化中心在哪个国家？", "北京是中国的首都。北京也是中国的文化中心。"),
                      ("哪里？", "中国 中国中国。上海在中国东部。")]


def assert_same_answers(got, want):
  assert got["answer"] == [w["answer"] for w in want]
  assert got["start"] == [-1 if w["start"] is None else w["start"] for w in want]
  assert got["end"] == [-1 if w["end"] is None else w["end"] for w in want]
  np.testing.assert_allclose(got["probability"], [w["probability"] for w in want],
                             atol=1e-5)


@pytest.mark.slow
def test_squad_exports_answer_as_predict(tmp_path, tmp_path_factory):
  """Tiny models fine-tuned on 12 SQuAD questions (fine_tune_squad's) of SQuAD 1.1 and
  of SQuAD 2.0 (its default head and transformers'): each exported SavedModel, called in
  one clean subprocess, answers the same questions as --predict, SQuAD 2.0's with its
  no-answer score."""
  models = {"squad/v1.1": shared_squad_model(tmp_path_factory, "squad/v1.1", "squadv1"),
            "squad/v2.0": shared_squad_model(tmp_path_factory, "squad/v2.0", "squad"),
            "squad/v2.0, transformers' head": shared_squad_model(
                tmp_path_factory, "squad/v2.0", "squad", TRANSFORMERS_QA_HEAD)}
  questions = qa_questions(models["squad/v1.1"][1])
  contexts = [c for _, c in questions]
  want = {}
  for name, (config, _) in models.items():
    path, want[name] = predict_questions(tmp_path, config, questions)
  windows = np.bincount(qa_data.featurize(
      Tokenizer(load_vocab(config.vocab_file)), list(qa_data.read_questions(str(path))),
      config.max_seq_length, config.section("qa").max_query_length,
      config.section("qa").doc_stride).example_index)
  assert windows.max() >= 5 and windows.min() == 1  # long paragraphs and short contexts
  outputs = call_in_clean_process(*[
      {"path": os.path.join(f"{config.model_dir}_1", serving.SAVED_MODEL),
       "serving_default": {"question": [q for q, _ in questions], "context": contexts}}
      for config, _ in models.values()])
  got = {name: out["serving_default"] for name, out in zip(models, outputs)}
  for name in models:
    assert_same_answers(got[name], want[name])
  assert "no_answer_score" not in got["squad/v1.1"]
  # Some answer starts or ends inside a word (get_final_text trimmed it).
  assert any(0 < w["start"] and not c[w["start"] - 1].isspace() or
             w["end"] < len(c) and not c[w["end"]].isspace()
             for w, c in zip(want["squad/v1.1"], contexts))
  for name in ("squad/v2.0", "squad/v2.0, transformers' head"):
    np.testing.assert_allclose(got[name]["no_answer_score"],
                               [w["no_answer_score"] for w in want[name]], atol=1e-5,
                               err_msg=name)
    assert got[name]["no_answer"] == [w["no_answer"] for w in want[name]], name
