"""Batches cut to their longest example (finetune/padding.py): the same outputs, losses
and scores as batches padded to max_seq_length, on a few traced shapes."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from finetune import config as finetune_config
from finetune import padding, trainer
from model.dropout import kept_units
from tests.conftest import shared_path, write_tiny_pretrained_model
from tests.helpers import chunk_data, head_of
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


def sst2_data(tmp_path, rows=65):
  data = tmp_path / "data"
  for split in ("train", "dev"):
    head_of(shared_path("glue", "SST-2", f"{split}.tsv"),
            data / "finetuning_data" / "SST-2" / f"{split}.tsv", rows)
  write_tiny_pretrained_model(data)
  return data


def run(data, task, multiple, tmp_path, **overrides):
  name = f"m{multiple}"
  config = finetune_config.load_config("tiny", [task], str(data), {
      "max_seq_length": MAX_LENGTH, "train_batch_size": 8, "eval_batch_size": 8,
      "num_train_epochs": 2.0, "log_every_steps": 1, "export_serving": False,
      "write_curves": False, "batch_length_multiple": multiple,
      "model_dir": str(tmp_path / name / "model"),
      "results_dir": str(tmp_path / name / "results"), **overrides})
  finetuner = trainer.Finetuner(config, log=lambda _: None)
  finetuner.read_splits()
  result = finetuner.run_trial(1)
  log = read_log(str(tmp_path / name / "model_1" / LOG_NAME))
  return finetuner, result, log


@pytest.mark.parametrize("task", ["glue/sst2", "chunk"])
def test_training_at_the_batches_length_equals_training_at_max_seq_length(tmp_path, task):
  data = (sst2_data(tmp_path) if task == "glue/sst2"
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
  assert np.all(lengths >= padding.token_counts(train)[order].reshape(-1, 8).max(-1))


@pytest.mark.parametrize("task", ["glue/sst2", "chunk"])
def test_eval_outputs_at_the_batches_length_equal_those_at_max_seq_length(tmp_path, task):
  data = (sst2_data(tmp_path) if task == "glue/sst2"
          else chunk_data(tmp_path, train=16, test=40))
  cut, _, _ = run(data, task, 8, tmp_path, num_train_epochs=1.0)
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


def test_an_example_longer_than_max_seq_length_is_cut_as_before(tmp_path):
  data = sst2_data(tmp_path, rows=9)
  long_text = " ".join(["wonderful"] * 200)
  with open(data / "finetuning_data" / "SST-2" / "train.tsv", "a",
            encoding="utf-8") as f:
    f.write(f"{long_text}\t1\n")
  finetuner, _, _ = run(data, "glue/sst2", 8, tmp_path, num_train_epochs=1.0)
  train = finetuner.train_features()
  assert padding.token_counts(train).max() == MAX_LENGTH
  order = finetuner.example_order(len(train["input_ids"]), 8, seed=1)
  longest = padding.token_counts(train)[order].max()
  assert finetuner.train_lengths(train, order).tolist() == [
      MAX_LENGTH if longest == MAX_LENGTH else -(-longest // 8) * 8]


def test_the_training_step_is_traced_once_for_every_length(tmp_path):
  data = sst2_data(tmp_path)
  finetuner, _, _ = run(data, "glue/sst2", 8, tmp_path, num_train_epochs=1.0)
  train = finetuner.train_features()
  loop = finetuner.train_loop(train, 8, str(tmp_path / "loop"))
  step = loop.train_step()
  iterator = loop.iterator(finetuner.dataset_fn(train, 8, seed=3))
  for _ in range(8):
    step(iterator)
  order = finetuner.example_order(len(train["input_ids"]), 64, seed=3)
  assert len(set(finetuner.train_lengths(train, order).tolist())) > 1
  assert step.experimental_get_tracing_count() == 1


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
