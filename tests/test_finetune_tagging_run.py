"""Chunking fine-tuning: a sentence's windows (each word labelled at its first piece,
owned by its window of most context), span-F1 scoring against seqeval, and an end-to-end
run on part of the shared CoNLL-2000 data (scored on its test split)."""

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

LENGTH, STRIDE = 24, 8  # windows of 22 pieces, one every 8


@pytest.fixture(scope="module")
def sentences():
  return tagging_data.read_file(tasks.get_task("chunk"),
                                shared_path("conll2000", "test.txt"))[:200]


@pytest.fixture(scope="module")
def runner():
  tokenizer = Tokenizer(load_vocab(shared_path("vocab", "bert_uncased_vocab.txt")))
  config = finetune_config.load_config("electra_small", ["chunk"], "unused",
                                       {"max_seq_length": LENGTH,
                                        "tagging_stride": STRIDE})
  return TaggingRunner(tasks.get_task("chunk"), config, tokenizer)


def owners(runner, sentences, features):
  """Each sentence's rows, and each word's (row, slot) where it has the most context,
  worked out here from the windows' pieces: min(left, right) pieces + 0.01 x the
  window's, first window on ties."""
  vocab = runner.tokenizer.vocab
  rows = {}
  for row, index in enumerate(features["sentence_index"]):
    rows.setdefault(int(index), []).append(row)
  owner = []
  for index, sentence in enumerate(sentences):
    pieces = [runner.tokenizer.ids(w) or [vocab.unk_id] for w in sentence.words]
    flat = [p for word in pieces for p in word]
    first = np.cumsum([0] + [len(p) for p in pieces])[:-1]
    best = [(-1.0, None)] * len(sentence.words)
    for k, row in enumerate(rows[index]):
      used = int(features["input_mask"][row].sum())
      ids = features["input_ids"][row, :used].tolist()
      start, span = k * STRIDE, used - 2
      assert ids == [vocab.cls_id] + flat[start:start + span] + [vocab.sep_id]
      held = [w for w, p in enumerate(first) if start <= p < start + span]
      count = int(features["word_label_mask"][row].sum())
      assert list(range(features["first_word"][row], features["first_word"][row] + count)) \
          == held
      np.testing.assert_array_equal(features["word_positions"][row, :count],
                                    1 + first[held] - start)
      labels = [tagging_data.to_bioes(sentence.tags)[w] for w in held]
      assert [runner.labels[k] for k in features["word_labels"][row, :count]] == labels
      for slot, w in enumerate(held):
        score = min(first[w] - start, start + span - 1 - first[w]) + 0.01 * span
        if score > best[w][0]:
          best[w] = (score, (row, slot))
    assert start + span == len(flat)  # the last window ends the sentence
    owner.append([where for _, where in best])
  return rows, owner


def test_each_word_labelled_in_every_window_and_owned_where_it_sees_most(runner,
                                                                          sentences):
  features = runner.features(sentences, "test")
  rows, owner = owners(runner, sentences, features)
  owned = {(r, s) for r, s in zip(*np.nonzero(features["word_owned"]))}
  assert owned == {where for sentence in owner for where in sentence}
  assert len(owned) == sum(len(s.words) for s in sentences)  # each word once
  several = sum(len(r) > 1 for r in rows.values())
  assert 0 < several < len(sentences)  # max_seq_length 24 splits some sentences


def test_score_is_conlleval_span_f1_of_each_words_owner(runner, sentences):
  features = runner.features(sentences, "test")
  _, owner = owners(runner, sentences, features)
  rng = np.random.default_rng(0)
  num_labels = len(runner.labels)
  # Logits whose argmax is the gold BIOES label, with some words changed at random.
  gold_ids = features["word_labels"]
  chosen = np.where(rng.random(gold_ids.shape) < 0.1,
                    rng.integers(0, num_labels, gold_ids.shape), gold_ids)
  logits = rng.normal(size=gold_ids.shape + (num_labels,))
  np.put_along_axis(logits, chosen[..., None], 10.0, axis=-1)
  scores = runner.score(sentences, features, logits, "test")
  gold = [list(sentence.tags) for sentence in sentences]
  predicted = [tagging_data.to_bio([runner.labels[chosen[row, slot]] for row, slot in words])
               for words in owner]
  assert scores["f1"] == pytest.approx(100 * seqeval.metrics.f1_score(gold, predicted))
  assert scores["precision"] == pytest.approx(
      100 * seqeval.metrics.precision_score(gold, predicted))
  assert scores["recall"] == pytest.approx(
      100 * seqeval.metrics.recall_score(gold, predicted))
  # Exact logits are perfect, long sentences included: every word is tagged.
  exact = np.eye(num_labels)[gold_ids]
  assert runner.score(sentences, features, exact, "test")["f1"] == 100.0


@pytest.mark.slow
def test_chunking_trains_and_scores_the_test_split(tmp_path):
  data = chunk_data(tmp_path, 320, 100)
  # Each step's batch of 16 runs as 2 accumulated micro-batches.
  overrides = {"max_seq_length": 96, "train_batch_size": 16, "eval_batch_size": 50,
               "num_train_epochs": 2.0, "learning_rate": 2e-3,
               "gradient_accumulation_steps": 2, "export_serving": False,  # test_serving's
               "write_curves": False}
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

