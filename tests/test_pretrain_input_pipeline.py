"""The pre-training input pipeline: batches, sharding, and errors that name the file.

Also holds the helpers other pre-training tests use to write small real data sets.
"""

import os
import re

import numpy as np
import pytest
import tensorflow as tf

from pretrain import input_pipeline
from pretrain.config import load_config
from tests.helpers import write_records


def small_config(data_dir, **overrides):
  return load_config("electra_small", data_dir, {"debug": True, "max_seq_length": 16,
                                                 **overrides})


@pytest.fixture
def tiny_data(tmp_path):
  seqs = [[101] + [1000 + 10 * i + j for j in range(14)] + [102] for i in range(10)]
  for shard in range(2):
    write_records(str(tmp_path / "pretrain_tfrecords" /
                      f"pretrain_data.tfrecord-{shard}-of-2"), seqs[shard::2], 16)
  return tmp_path, seqs


def test_batches_cover_every_record_in_order_for_eval(tiny_data):
  root, seqs = tiny_data
  config = small_config(str(root))
  files = input_pipeline.input_files(config)
  assert [os.path.basename(f) for f in files] == [
      "pretrain_data.tfrecord-0-of-2", "pretrain_data.tfrecord-1-of-2"]
  assert input_pipeline.check_files(files, 16, 0.15) is None
  batches = list(input_pipeline.make_dataset(files, 5, 16, training=False).take(2))
  ids = np.concatenate([b["input_ids"].numpy() for b in batches])
  assert batches[0]["input_ids"].dtype == tf.int32 and ids.shape == (10, 16)
  # Interleaved shards hold every record once.
  assert sorted(map(tuple, ids.tolist())) == sorted(map(tuple, seqs))


def test_training_batches_are_shuffled_repeated_and_reproducible(tiny_data):
  root, _ = tiny_data
  files = input_pipeline.input_files(small_config(str(root)))
  take = lambda: [b["input_ids"].numpy()[:, 1].tolist() for b in
                  input_pipeline.make_dataset(files, 4, 16, training=True, seed=3).take(6)]
  first = take()
  assert first == take()  # same seed, same order (resume depends on it)
  flat = sum(first, [])
  # 24 draws from 10 records: repeated; shuffled across shards and epochs.
  assert len(flat) == 24 and set(flat) <= {1000 + 10 * i for i in range(10)}
  assert len(set(flat)) >= 6 and flat != sorted(flat)


def test_workers_read_disjoint_shares(tiny_data):
  root, _ = tiny_data
  files = input_pipeline.input_files(small_config(str(root)))
  seen = []
  for worker in range(2):
    context = tf.distribute.InputContext(2, worker, 2)
    batch = next(iter(input_pipeline.make_dataset(files, 5, 16, training=False,
                                                  input_context=context)))
    seen.append(set(batch["input_ids"].numpy()[:, 1].tolist()))
  assert not seen[0] & seen[1] and len(seen[0] | seen[1]) == 10


def test_static_masks_are_read(tmp_path):
  path = str(tmp_path / "pretrain_tfrecords" / "pretrain_data.tfrecord-0-of-1")
  write_records(path, [[101, 5, 6, 102]] * 4, 8,
                static_masks=[([1, 2, 0], [5, 6, 0], [1.0, 1.0, 0.0])] * 4)
  # Masks drawn with mask_prob 0.375 (int((0.375 + 0.005) * 8) = 3 positions) serve a run
  # of that mask_prob, and are refused by a run that would mask fewer.
  assert input_pipeline.check_files([path], 8, mask_prob=0.375) == 3
  with pytest.raises(input_pipeline.InputError,
                     match=r"static masks of 3 positions .* mask_prob 0.15 masks up to 1; "
                           r"set \"mask_prob\""):
    input_pipeline.check_files([path], 8, mask_prob=0.15)
  batch = next(iter(input_pipeline.make_dataset([path], 2, 8, training=False,
                                                static_mask_length=3)))
  assert batch["masked_lm_ids"].numpy().tolist() == [[5, 6, 0]] * 2
  assert batch["masked_lm_weights"].dtype == tf.float32


def test_missing_data_names_the_command(tmp_path):
  with pytest.raises(input_pipeline.InputError, match=(
      r"nothing matches .*pretrain_tfrecords.*run `python build_pretraining_dataset.py "
      r"--data-dir .*`")):
    input_pipeline.input_files(small_config(str(tmp_path)))


def test_corrupt_file_is_named(tiny_data):
  root, _ = tiny_data
  bad = root / "pretrain_tfrecords" / "pretrain_data.tfrecord-1-of-2"
  bad.write_bytes(b"this is not a tfrecord file at all, just text" * 3)
  files = input_pipeline.input_files(small_config(str(root)))
  with pytest.raises(input_pipeline.InputError, match=f"{bad}: not a readable TFRecord"):
    input_pipeline.check_files(files, 16, 0.15)


def test_truncated_file_is_located(tiny_data):
  root, _ = tiny_data
  path = root / "pretrain_tfrecords" / "pretrain_data.tfrecord-0-of-2"
  path.write_bytes(path.read_bytes()[:-30])  # the first record stays readable
  files = input_pipeline.input_files(small_config(str(root)))
  assert input_pipeline.check_files(files, 16, 0.15) is None
  located = input_pipeline.locate_corrupt_file(files)
  # Plain words, none of TensorFlow's op names or graph context.
  assert re.fullmatch(rf"{re.escape(str(path))}: corrupt TFRecord file \(the record at "
                      r"byte \d+ is cut short\); rebuild it", located), located
  data = bytearray(path.read_bytes())
  data[len(data) // 2] ^= 0xFF  # a flipped byte inside a record: its checksum fails
  path.write_bytes(bytes(data))
  located = input_pipeline.locate_corrupt_file(files)
  assert re.fullmatch(rf"{re.escape(str(path))}: corrupt TFRecord file \(the record at "
                      r"byte \d+ is damaged\); rebuild it", located), located


def test_sequence_length_mismatch_is_named(tiny_data):
  root, _ = tiny_data
  files = input_pipeline.input_files(small_config(str(root)))
  with pytest.raises(input_pipeline.InputError, match=(
      r"tfrecord-0-of-2: records hold sequences of length 16 but max_seq_length is 128")):
    input_pipeline.check_files(files, 128, 0.15)


def test_token_log_frequencies_count_real_non_special_tokens(tmp_path):
  """Against a count by hand: padding and special tokens left out, static masks
  written back, only the first max_records records, add-one smoothing."""
  vocab_size, special = 12, (2, 3, 4)  # [CLS], [SEP], [MASK]
  sequences = [[2, 5, 6, 6, 3], [2, 4, 7, 3, 8, 3], [2, 9, 9, 9, 3], [2, 11, 3]]
  # The second record's [MASK] at position 1 hides a 10.
  masks = [([0, 0], [0, 0], [0.0, 0.0]), ([1, 0], [10, 0], [1.0, 0.0]),
           ([0, 0], [0, 0], [0.0, 0.0]), ([0, 0], [0, 0], [0.0, 0.0])]
  files = [str(tmp_path / "a.tfrecord"), str(tmp_path / "b.tfrecord")]
  write_records(files[0], sequences[:2], 8, masks[:2])
  write_records(files[1], sequences[2:], 8, masks[2:])
  log_p = input_pipeline.token_log_frequencies(files, vocab_size, special,
                                               static_mask_length=2, max_records=3)
  counts = np.ones(vocab_size)
  for token in (5, 6, 6, 10, 7, 8, 9, 9, 9):  # the first three records' real tokens
    counts[token] += 1
  np.testing.assert_allclose(np.exp(log_p), counts / counts.sum(), rtol=1e-12)
