"""Chunking fine-tuning: word-level features, span-F1 scoring against seqeval, and an
end-to-end run on part of the shared CoNLL-2000 data (scored on its test split)."""

import json

import numpy as np
import pytest
import seqeval.metrics

from data_prep.tokenizer import Tokenizer
from data_prep.vocab import load_vocab
from finetune import config as finetune_config
from finetune import tasks, trainer
from finetune.tagging import data as tagging_data
from finetune.tagging.model import TaggingRunner
from tests.helpers import chunk_data, shared_path


@pytest.fixture(scope="module")
def sentences():
  return tagging_data.read_conll(shared_path("conll2000", "test.txt"))[:200]


@pytest.fixture(scope="module")
def runner():
  tokenizer = Tokenizer(load_vocab(shared_path("vocab", "bert_uncased_vocab.txt")))
  config = finetune_config.load_config("electra_small", ["chunk"], "unused",
                                       {"max_seq_length": 48})
  return TaggingRunner(tasks.get_task("chunk"), config, tokenizer)


def test_labels_sit_on_each_words_first_piece(runner, sentences):
  features = runner.features(sentences, "test")
  vocab = runner.tokenizer.vocab
  truncated = 0
  for i, sentence in enumerate(sentences):
    ids = features["input_ids"][i]
    used = int(features["input_mask"][i].sum())
    assert ids[0] == vocab.cls_id and ids[used - 1] == vocab.sep_id
    count = int(features["word_label_mask"][i].sum())
    positions = features["word_positions"][i, :count]
    # The pieces between a word's position and the next are that word's own pieces.
    ends = list(positions[1:]) + [used - 1]
    for word, start, end in zip(sentence.words, positions, ends):
      assert ids[start:end].tolist() == runner.tokenizer.ids(word)
    labels = [tagging_data.BIOES_LABELS[k] for k in features["word_labels"][i, :count]]
    assert labels == tagging_data.to_bioes(sentence.tags)[:count]
    # Only what does not fit is cut: the next word would overflow the window.
    if count < len(sentence.words):
      truncated += 1
      assert used + len(runner.tokenizer.ids(sentence.words[count])) > 48
  assert 0 < truncated < len(sentences)  # max_seq_length 48 cuts some sentences


def test_score_is_conlleval_span_f1_with_cut_words_predicted_o(runner, sentences):
  features = runner.features(sentences, "test")
  rng = np.random.default_rng(0)
  num_labels = len(tagging_data.BIOES_LABELS)
  # Logits whose argmax is the gold BIOES label, with some words changed at random.
  gold_ids = features["word_labels"]
  chosen = np.where(rng.random(gold_ids.shape) < 0.1,
                    rng.integers(0, num_labels, gold_ids.shape), gold_ids)
  logits = rng.normal(size=gold_ids.shape + (num_labels,))
  np.put_along_axis(logits, chosen[..., None], 10.0, axis=-1)
  scores = runner.score(sentences, features, logits, "test")
  gold, predicted = [], []
  for i, sentence in enumerate(sentences):
    count = int(features["word_label_mask"][i].sum())
    bioes = [tagging_data.BIOES_LABELS[k] for k in chosen[i, :count]]
    bioes += ["O"] * (len(sentence.words) - count)
    gold.append(list(sentence.tags))
    predicted.append(tagging_data.to_bio(bioes))
  assert scores["f1"] == pytest.approx(100 * seqeval.metrics.f1_score(gold, predicted))
  assert scores["precision"] == pytest.approx(
      100 * seqeval.metrics.precision_score(gold, predicted))
  assert scores["recall"] == pytest.approx(
      100 * seqeval.metrics.recall_score(gold, predicted))
  # Exact logits are perfect on sentences that fit; cut-off words lose their chunks.
  exact = np.eye(num_labels)[gold_ids]
  fits = [i for i, sentence in enumerate(sentences)
          if features["word_label_mask"][i].sum() == len(sentence.words)]
  assert runner.score([sentences[i] for i in fits],
                      {k: v[fits] for k, v in features.items()}, exact[fits],
                      "test")["f1"] == 100.0
  assert runner.score(sentences, features, exact, "test")["recall"] < 100.0


@pytest.mark.slow
def test_chunking_trains_and_scores_the_test_split(tmp_path):
  data = chunk_data(tmp_path, 320, 100)
  # Each step's batch of 16 runs as 2 accumulated micro-batches.
  overrides = {"max_seq_length": 96, "train_batch_size": 16, "eval_batch_size": 50,
               "num_train_epochs": 2.0, "learning_rate": 2e-3,
               "gradient_accumulation_steps": 2, "export_serving": False}  # test_serving's
  config = finetune_config.load_config("tiny", ["chunk"], str(data), overrides)
  report = trainer.run(config, log=lambda _: None)
  summary = {k: v["median"] for k, v in report["summary"].items()}
  assert set(summary) == {"chunk test f1", "chunk test precision", "chunk test recall"}
  # A model predicting no chunk scores 0; this one has learned some chunks.
  assert summary["chunk test f1"] > 20.0
  results = json.loads(open(config.results_file("json")).read())
  assert results["summary"]["chunk test f1"]["median"] == summary["chunk test f1"]
  assert [h["epoch"] for h in report["trials"][0]["history"]] == [1, 2]
  assert "chunk test f1: median" in open(config.results_file("txt")).read()

