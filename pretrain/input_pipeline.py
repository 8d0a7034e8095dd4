"""The pre-training input pipeline: TFRecord shards -> batches of int32 features, and
the shards' checks before training.

Shards are read in parallel (interleaved in a fixed order, so a run is reproducible and
its iterator can be checkpointed), shuffled, repeated and prefetched. Records written
with static masks keep them (the objective uses them as they are).
"""

import glob
import os
import re
from typing import List, Optional, Sequence

import numpy as np
import tensorflow as tf

from data_prep import records
from pretrain.config import PretrainingConfig
from util import cli

SHUFFLE_BUFFER = 1000  # examples; kept small because checkpoints hold the buffer


class InputError(ValueError):
  """Pre-training data that is missing or does not fit the config."""


def build_command(config: PretrainingConfig) -> str:
  command = "python build_pretraining_dataset.py"
  if os.path.normpath(config.data_dir) != os.path.normpath(PretrainingConfig.data_dir):
    command += f" --data-dir {config.data_dir}"
  return command


def matching_files(config: PretrainingConfig) -> List[str]:
  """The shards matching config.pretrain_tfrecords (comma-separated patterns)."""
  files = []
  for pattern in config.pretrain_tfrecords.split(","):
    files += sorted(glob.glob(pattern.strip()))
  return files


def input_files(config: PretrainingConfig) -> List[str]:
  files = matching_files(config)
  if not files:
    raise InputError(f"no pre-training data: nothing matches {config.pretrain_tfrecords}"
                     f"; run `{build_command(config)}` first (or set pretrain_tfrecords)")
  return files


def _first_examples(path: str, count: int = 1) -> List[tf.train.Example]:
  """The file's first `count` records (at least one, else an InputError)."""
  try:
    records_read = [r.numpy() for r in tf.data.TFRecordDataset(path).take(count)]
  except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as e:
    raise InputError(f"{path}: not a readable TFRecord file ({cli.op_error_text(e)}); "
                     "rebuild it") from None
  if not records_read:
    raise InputError(f"{path}: holds no records; rebuild the data")
  try:
    return [tf.train.Example.FromString(record) for record in records_read]
  except Exception:  # pylint: disable=broad-except
    raise InputError(f"{path}: the first record is not a tf.train.Example; rebuild the "
                     "data") from None


# Records whose token ids are checked against the vocabulary, per file: records built
# with another vocabulary show ids beyond a smaller one within a few sequences.
IDS_CHECKED = 64


def check_token_ids(files: List[str], vocab_size: int, vocab_file: str):
  """Refuses records built with a larger vocabulary than vocab_file's (their ids would
  index past the embeddings), from the largest id in each file's first records."""
  for path in files:
    largest = max(max(example.features.feature["input_ids"].int64_list.value, default=0)
                  for example in _first_examples(path, IDS_CHECKED))
    if largest >= vocab_size:
      raise InputError(
          f"{path}: token id {largest} in its first records is outside the "
          f"vocabulary of {vocab_size} tokens ({vocab_file}); the records were built "
          "with another vocabulary: set vocab_file to the vocab.txt they were built "
          "with, or rebuild them with this one")


# Records counted for the generator's unigram start (generator_unigram_init): ~2.6M
# tokens at length 128, a few seconds, and frequent tokens' shares are settled long before.
UNIGRAM_RECORDS = 20000


def token_log_frequencies(files: List[str], vocab_size: int, special_ids: Sequence[int],
                          static_mask_length: Optional[int] = None,
                          max_records: int = UNIGRAM_RECORDS) -> np.ndarray:
  """log p(token) [vocab_size] over the real tokens other than `special_ids` in the
  first `max_records` records (static masks written back), add-one smoothed."""
  counts = np.zeros(vocab_size, np.int64)
  seen = 0
  for path in files:
    for example in _first_examples(path, max_records - seen):
      feature = example.features.feature
      ids = np.array(feature["input_ids"].int64_list.value)
      if static_mask_length:
        weights = np.array(feature["masked_lm_weights"].float_list.value) > 0
        positions = np.array(feature["masked_lm_positions"].int64_list.value)[weights]
        ids[positions] = np.array(feature["masked_lm_ids"].int64_list.value)[weights]
      real = np.array(feature["input_mask"].int64_list.value) > 0
      ids = ids[real & ~np.isin(ids, list(special_ids))]
      counts += np.bincount(ids, minlength=vocab_size)[:vocab_size]
      seen += 1
    if seen >= max_records:
      break
  smoothed = counts + 1.0
  return np.log(smoothed / smoothed.sum())


def check_files(files: List[str], max_seq_length: int, mask_prob: float) -> Optional[int]:
  """Checks each shard's first record (static masks: as many positions as this run's
  max_predictions_per_seq); returns the static-mask length, or None."""
  static_length = None
  for path in files:
    features = _first_examples(path)[0].features.feature
    missing = [n for n in records.SEQUENCE_FEATURES if n not in features]
    if missing:
      raise InputError(f"{path}: records lack the feature(s) {', '.join(missing)}; "
                       "expected pre-training records from build_pretraining_dataset.py")
    length = len(features["input_ids"].int64_list.value)
    if length != max_seq_length:
      raise InputError(f"{path}: records hold sequences of length {length} but "
                       f"max_seq_length is {max_seq_length}; set \"max_seq_length\": "
                       f"{length} or rebuild the data with --max-seq-length "
                       f"{max_seq_length}")
    if "masked_lm_positions" in features:
      static_length = len(features["masked_lm_positions"].int64_list.value)
      expected = records.max_predictions_per_seq(mask_prob, max_seq_length)
      if static_length != expected:
        raise InputError(
            f"{path}: records carry static masks of {static_length} positions (built "
            f"with a mask probability of about {static_length / max_seq_length:.3f}) but "
            f"mask_prob {mask_prob:g} masks up to {expected}; set \"mask_prob\" to the "
            f"build's --mask-prob, or rebuild with --static-masking --mask-prob "
            f"{mask_prob:g}")
  return static_length


def locate_corrupt_file(files: List[str]) -> Optional[str]:
  """The first shard that cannot be read to its end, with the reason (slow: reads all)."""
  for path in files:
    try:
      for _ in tf.data.TFRecordDataset(path):
        pass
    except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as e:
      reason = cli.op_error_text(e)
      at = re.match(r"(corrupted|truncated) record at (\d+)", reason)
      if at:  # TensorFlow's wording carries a stray quote: say it plainly
        reason = (f"the record at byte {at.group(2)} is "
                  + ("cut short" if at.group(1) == "truncated" else "damaged"))
      return f"{path}: corrupt TFRecord file ({reason}); rebuild it"
  return None


def make_dataset(files: List[str], batch_size: int, max_seq_length: int, *,
                 training: bool, seed: int = 0, static_mask_length: Optional[int] = None,
                 input_context: Optional[tf.distribute.InputContext] = None
                 ) -> tf.data.Dataset:
  """Batches of {name: int32/float32 [batch_size, ...]} for one worker: its own share
  of the shards (of the records, when there are fewer shards than workers)."""
  spec = records.feature_spec(max_seq_length, static_mask_length)
  workers = input_context.num_input_pipelines if input_context else 1
  worker = input_context.input_pipeline_id if input_context else 0
  shard_files = workers > 1 and len(files) >= workers
  # Absolute: a checkpointed iterator names the file it reads, which a run resumed from
  # another working directory must find.
  d = tf.data.Dataset.from_tensor_slices([os.path.abspath(f) for f in files])
  if shard_files:
    d = d.shard(workers, worker)
  if training:
    d = d.shuffle(len(files), seed=seed, reshuffle_each_iteration=True).repeat()
  d = d.interleave(tf.data.TFRecordDataset, cycle_length=min(len(files), 8),
                   num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  if workers > 1 and not shard_files:
    d = d.shard(workers, worker)
  if training:
    d = d.shuffle(SHUFFLE_BUFFER, seed=seed, reshuffle_each_iteration=True)
  else:
    d = d.repeat()  # eval runs a fixed number of batches, whatever the data size
  d = d.batch(batch_size, drop_remainder=True)

  def parse(records):
    example = tf.io.parse_example(records, spec)
    return {k: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v
            for k, v in example.items()}
  return d.map(parse, num_parallel_calls=tf.data.AUTOTUNE,
               deterministic=True).prefetch(tf.data.AUTOTUNE)
