"""Batches cut to their longest example (finetune/padding.py): the same outputs, losses
and scores as batches padded to max_seq_length, on a few traced shapes."""

import dataclasses
import json

import numpy as np
import pytest
import tensorflow as tf

from finetune import config as finetune_config
from finetune import padding, trainer
from model.dropout import kept_units
from tests.helpers import (as_v2, chunk_data, head_of, shared_path, squad_subset,
                           write_json, write_tiny_pretrained_model)
from training.curves import LOG_NAME, read_log

MAX_LENGTH = 64


def test_batch_lengths_round_up_to_the_multiple_and_stop_at_the_maximum():
  counts = np.array([[3, 17, 9], [64, 2, 2], [16, 1, 1], [33, 5, 5]])
  assert padding.batch_lengths(counts, 16, 64).tolist() == [32, 64, 16, 48]
  assert padding.batch_lengths(counts, 1, 64).tolist() == [17, 64, 16, 33]
  assert padding.batch_lengths(counts, 0, 64).tolist() == [64, 64, 64, 64]
  assert padding.batch_lengths(counts, 48, 64).tolist() == [48, 64, 48, 48]


def test_a_cut_batch_drops_the_units_its_padded_batch_drops():
  key = tf.constant([2024, 77], tf.uint32)
  for full, cut in (([4, 64, 8], [4, 16, 8]), ([2, 3, 64, 64], [2, 3, 32, 32])):
    padded = kept_units(key, tf.constant(full), 0.3).numpy()
    layout = kept_units(key, tf.constant(cut), 0.3, layout=tf.constant(full)).numpy()
    assert np.array_equal(padded[tuple(slice(0, n) for n in cut)], layout)
    # Laid out in itself, the mask is the flat count's (every run before the cut).
    assert np.array_equal(kept_units(key, tf.constant(full), 0.3, tf.constant(full)),
                          padded)


# A training example longer than max_seq_length (cut to it).
LONG_ROW = " ".join(["wonderful"] * 200) + "\t1\n"


def sst2_data(tmp_path, rows=65, long_row=False):
  """SST-2's first `rows` lines of each split (and LONG_ROW after the training ones)."""
  data = tmp_path / "data"
  for split in ("train", "dev"):
    head_of(shared_path("glue", "SST-2", f"{split}.tsv"),
            data / "finetuning_data" / "SST-2" / f"{split}.tsv", rows)
  if long_row:
    with open(data / "finetuning_data" / "SST-2" / "train.tsv", "a",
              encoding="utf-8") as f:
      f.write(LONG_ROW)
  write_tiny_pretrained_model(data)
  return data


def finetuner_of(data, task, multiple, tmp_path, **overrides):
  """The Finetuner of `task` with batches cut to `multiple` (0: max_seq_length), its
  splits read."""
  name = f"m{multiple}"
  config = finetune_config.load_config("tiny", [task], str(data), {
      "max_seq_length": MAX_LENGTH, "train_batch_size": 8, "eval_batch_size": 8,
      "num_train_epochs": 2.0, "log_every_steps": 1, "export_serving": False,
      "write_curves": False, "batch_length_multiple": multiple,
      "model_dir": str(tmp_path / name / "model"),
      "results_dir": str(tmp_path / name / "results"), **overrides})
  finetuner = trainer.Finetuner(config, log=lambda _: None)
  finetuner.read_splits()
  return finetuner


def run(data, task, multiple, tmp_path, **overrides):
  name = f"m{multiple}"
  finetuner = finetuner_of(data, task, multiple, tmp_path, **overrides)
  result = finetuner.run_trial(1)
  log = read_log(str(tmp_path / name / "model_1" / LOG_NAME))
  return finetuner, result, log


@pytest.mark.slow
@pytest.mark.parametrize("task", ["glue/sst2", "chunk"])
def test_training_at_the_batches_length_equals_training_at_max_seq_length(tmp_path, task):
  # SST-2's 64 training examples hold one cut to max_seq_length: its batch trains at
  # max_seq_length.
  data = (sst2_data(tmp_path, rows=64, long_row=True) if task == "glue/sst2"
          else chunk_data(tmp_path, train=48, test=24))
  # Dropout stays on: the cut batches must drop the units the padded ones drop.
  cut, cut_result, cut_log = run(data, task, 8, tmp_path)
  _, fixed_result, fixed_log = run(data, task, 0, tmp_path)
  assert sorted(cut_log) == sorted(fixed_log) and len(cut_log) > 4
  np.testing.assert_allclose([cut_log[s]["loss"] for s in sorted(cut_log)],
                             [fixed_log[s]["loss"] for s in sorted(fixed_log)], rtol=1e-5)
  for (name, scores), (_, fixed) in zip(cut_result["scores"].items(),
                                        fixed_result["scores"].items()):
    for metric, value in scores.items():
      assert value == pytest.approx(fixed[metric], abs=1e-4), (name, metric)
  # The batches were cut: their lengths are multiples of 8 below the maximum, and the
  # step was traced once for all of them.
  train = cut.train_features()
  order = cut.example_order(len(train["input_ids"]), 8 * 8, seed=1)
  lengths = cut.train_lengths(train, order)
  assert set(lengths.tolist()) <= set(range(8, MAX_LENGTH + 1, 8))
  assert lengths.min() < MAX_LENGTH
  if task == "glue/sst2":
    assert lengths.max() == MAX_LENGTH  # the long example's batch
  assert np.all(lengths >= padding.token_counts(train)[order].reshape(-1, 8).max(-1))


@pytest.mark.slow
@pytest.mark.parametrize("task", ["glue/sst2", "chunk"])
def test_eval_outputs_at_the_batches_length_equal_those_at_max_seq_length(tmp_path, task):
  data = (sst2_data(tmp_path) if task == "glue/sst2"
          else chunk_data(tmp_path, train=16, test=40))
  # (A model as built, untrained: the outputs' equality is the cut's, whatever the
  # weights.)
  cut = finetuner_of(data, task, 8, tmp_path)
  model = cut.build_model()
  features = cut.split(0, cut.tasks[0].eval_splits[0]).features
  outputs = cut.predict(model, features)[task]
  cut.config = dataclasses.replace(cut.config, batch_length_multiple=0)
  padded = cut.predict(model, features)[task]
  assert outputs.shape == padded.shape
  counts = padding.token_counts(features)[:len(padded) // 8 * 8].reshape(-1, 8)
  assert padding.batch_lengths(counts, 8, MAX_LENGTH).min() < MAX_LENGTH  # some were cut
  # Tagging's outputs are read at the words only.
  read = features["word_label_mask"] > 0 if task == "chunk" else slice(None)
  np.testing.assert_allclose(outputs[read], padded[read], atol=1e-5)


@pytest.mark.slow
def test_qa_windows_cut_to_their_longest_answer_as_padded_ones(tmp_path):
  # SQuAD 2.0 windows (joint head, answerability classifier) of one short context each
  # (its first 250 characters, the questions answered there): every batch is cut; the
  # beam (100 starts) is longer than any window, so evaluation's batches stay at least
  # that long.
  with open(shared_path("squad", "dev-v1.1.json"), encoding="utf-8") as f:
    articles = json.load(f)["data"]
  for paragraph in (p for a in articles[:2] for p in a["paragraphs"]):
    paragraph["context"] = paragraph["context"][:250]
    paragraph["qas"] = [q for q in paragraph["qas"] if all(
        a["answer_start"] + len(a["text"]) <= 250 for a in q["answers"])] or paragraph[
            "qas"][:0]
  data = tmp_path / "data"
  for split, part in (("train", articles[:1]), ("dev", articles[1:2])):
    document = squad_subset(part, 6, 3)
    for article in document["data"]:
      article["paragraphs"] = [p for p in article["paragraphs"] if p["qas"]]
    write_json(data / "finetuning_data" / "squad" / f"{split}.json", as_v2(document))
  write_tiny_pretrained_model(data)
  settings = {"max_seq_length": 128, "beam_size": 100, "num_train_epochs": 1.0}
  cut, cut_result, cut_log = run(data, "squad/v2.0", 8, tmp_path, **settings)
  _, fixed_result, fixed_log = run(data, "squad/v2.0", 0, tmp_path, **settings)
  assert sorted(cut_log) == sorted(fixed_log) and len(cut_log) >= 2
  np.testing.assert_allclose([cut_log[s]["loss"] for s in sorted(cut_log)],
                             [fixed_log[s]["loss"] for s in sorted(fixed_log)], rtol=1e-5)
  for metric, value in cut_result["scores"]["squad/v2.0 dev"].items():
    assert value == pytest.approx(fixed_result["scores"]["squad/v2.0 dev"][metric],
                                  abs=1e-4), metric
  train = cut.train_features()
  order = cut.example_order(len(train["input_ids"]), 8 * len(cut_log), seed=1)
  assert cut.train_lengths(train, order).max() < 128
  # The answers and their n-best lists (text, probability) are those of padded batches.
  def written(name, kind):
    path = tmp_path / name / "results" / "squad_v2.0_qa" / f"squad_v2.0_dev_{kind}.json"
    return json.loads(path.read_text(encoding="utf-8"))
  assert written("m8", "preds") == written("m0", "preds")
  for qid, entries in written("m8", "nbest").items():
    fixed = written("m0", "nbest")[qid]
    assert [e["text"] for e in entries] == [e["text"] for e in fixed]
    np.testing.assert_allclose([e["probability"] for e in entries],
                               [e["probability"] for e in fixed], atol=1e-5)


def test_qa_logits_are_padded_back_off_every_span_and_its_beams_kept():
  from finetune.qa.model import OFF_SPAN  # pylint: disable=import-outside-toplevel
  from finetune.qa.model import QARunner  # pylint: disable=import-outside-toplevel
  logits = np.array([[0.5, -2.0, OFF_SPAN + 0.3]], np.float32)
  top = np.array([[1, 0]])
  padded = QARunner.padded_outputs(None, {"start_logits": logits, "end_logits": logits,
                                          "start_top_index": top}, 5)
  for name in ("start_logits", "end_logits"):
    np.testing.assert_array_equal(padded[name], np.concatenate(
        [logits, np.full([1, 2], OFF_SPAN, np.float32)], 1))
  assert padded["start_top_index"] is top


@pytest.mark.slow
def test_an_example_longer_than_max_seq_length_is_cut_as_before(tmp_path):
  # (Training on it, cut or padded, is the training test's: its SST-2 split holds it.)
  finetuner = finetuner_of(sst2_data(tmp_path, rows=9, long_row=True), "glue/sst2", 8,
                           tmp_path, num_train_epochs=1.0)
  train = finetuner.train_features()
  assert padding.token_counts(train).max() == MAX_LENGTH
  order = finetuner.example_order(len(train["input_ids"]), 8, seed=1)
  longest = padding.token_counts(train)[order].max()
  assert finetuner.train_lengths(train, order).tolist() == [
      MAX_LENGTH if longest == MAX_LENGTH else -(-longest // 8) * 8]


@pytest.mark.slow
def test_the_training_step_is_traced_once_for_every_length(tmp_path):
  data = sst2_data(tmp_path)
  finetuner = finetuner_of(data, "glue/sst2", 8, tmp_path)
  train = finetuner.train_features()
  loop = finetuner.train_loop(train, 8, str(tmp_path / "loop"))
  step = loop.train_step
  iterator = step.iterator(finetuner.dataset_fn(train, 8, seed=3))
  for _ in range(8):
    step(iterator)
  order = finetuner.example_order(len(train["input_ids"]), 64, seed=3)
  assert len(set(finetuner.train_lengths(train, order).tolist())) > 1
  assert step.compiled.experimental_get_tracing_count() == 1


def test_length_grouping_keeps_each_window_s_examples_and_shortens_the_batches():
  rng = np.random.default_rng(0)
  counts = rng.integers(3, 129, 400)
  order = np.concatenate([rng.permutation(400), rng.permutation(400)])  # two epochs
  grouped = padding.grouped_by_length(order, counts, 8, 25, seed=5)
  for start in range(0, len(order), 200):  # windows of 25 batches of 8
    assert sorted(grouped[start:start + 200]) == sorted(order[start:start + 200])
  batches = grouped.reshape(-1, 8)
  spread = counts[batches].max(-1) - counts[batches].min(-1)
  assert spread.mean() < 10  # like lengths in a batch (random batches: ~100)
  assert not np.array_equal(np.argsort(counts[batches].max(-1)), np.arange(len(batches)))
  assert (padding.batch_lengths(counts[batches], 8, 128).mean() <
          padding.batch_lengths(counts[order].reshape(-1, 8), 8, 128).mean() * 0.8)


def test_length_grouping_keeps_every_example_once_per_epoch_reproducibly():
  """Epochs that end inside a batch (397 examples, batches of 8): each epoch's
  positions still hold every example once, the batch across an epoch's end is kept as
  it was, and the order is the seed's alone."""
  rng = np.random.default_rng(1)
  counts = rng.integers(3, 129, 397)
  order = trainer.Finetuner.example_order(397, 1184, seed=4)  # 148 whole batches
  grouped = padding.grouped_by_length(order, counts, 8, 10, seed=5)
  for start in range(0, 2 * 397, 397):
    assert sorted(grouped[start:start + 397]) == list(range(397))
  assert sorted(grouped[794:]) == sorted(order[794:])
  across = [b for b in range(148) if (8 * b) // 397 != (8 * b + 7) // 397]
  assert across == [49, 99]
  for b in across:
    assert list(grouped[8 * b:8 * b + 8]) == list(order[8 * b:8 * b + 8])
  again = padding.grouped_by_length(order, counts, 8, 10, seed=5)
  assert np.array_equal(grouped, again)
  assert not np.array_equal(grouped, padding.grouped_by_length(order, counts, 8, 10, 6))
