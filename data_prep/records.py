"""The pre-training TFRecords: their contract, and the writer of the data build.

The contract (names, dtypes, lengths) is the original release's: int64 features of
length max_seq_length, so its reader parses our files and ours parses its files. Files
written with static masks carry three more features of length max_predictions_per_seq.

The writer encodes tf.train.Example protobufs and TFRecord framing itself, in bulk in
plain Python and NumPy, and needs no TensorFlow; the bytes are the same as
tf.io.TFRecordWriter's. With the tokenizer TensorFlow-free too, the build's worker
processes never import TensorFlow unless --static-masking asks for it.
"""

import os
import struct
from typing import Dict, List, Optional

import google_crc32c
import numpy as np

SEQUENCE_FEATURES = ("input_ids", "input_mask", "segment_ids")
STATIC_MASK_FEATURES = ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")
FILE_PATTERN = "pretrain_data.tfrecord-{index}-of-{count}"


def max_predictions_per_seq(mask_prob: float, max_seq_length: int) -> int:
  """How many positions a sequence masks at most: the static-mask features' length."""
  return int((mask_prob + 0.005) * max_seq_length)


def feature_spec(max_seq_length: int, max_predictions: Optional[int] = None) -> Dict:
  """The readers' parsing spec; the static-mask features when their length is given."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top  (readers only)
  spec = {name: tf.io.FixedLenFeature([max_seq_length], tf.int64)
          for name in SEQUENCE_FEATURES}
  if max_predictions is not None:
    spec.update({name: tf.io.FixedLenFeature([max_predictions], dtype) for name, dtype in
                 zip(STATIC_MASK_FEATURES, (tf.int64, tf.int64, tf.float32))})
  return spec


def _masked_crc(data: bytes) -> bytes:
  """TFRecord's checksum: CRC-32C, rotated right by 15 bits plus a constant."""
  crc = google_crc32c.value(data)
  return struct.pack("<I", (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF)


def frame(record: bytes) -> bytes:
  """One record as a TFRecord file holds it: length, its checksum, record, its checksum."""
  length = struct.pack("<Q", len(record))
  return length + _masked_crc(length) + record + _masked_crc(record)


class ShardWriter:
  """One process's shards of `out_dir`, filled round-robin with batches of features."""

  def __init__(self, out_dir: str, job: int, num_processes: int, num_out_files: int):
    self.paths = [os.path.join(out_dir, FILE_PATTERN.format(index=i, count=num_out_files))
                  for i in range(num_out_files) if i % num_processes == job]
    self.files = []
    self.written = 0

  def __enter__(self):
    self.files = [open(path, "wb") for path in self.paths]  # pylint: disable=consider-using-with
    return self

  def __exit__(self, *_):
    for file in self.files:
      file.close()

  def write(self, features: Dict[str, np.ndarray]):
    for record in serialize_examples(features):
      self.files[self.written % len(self.files)].write(frame(record))
      self.written += 1


def _varint(n: int) -> bytes:
  out = bytearray()
  while n >= 0x80:
    out.append((n & 0x7F) | 0x80)
    n >>= 7
  out.append(n)
  return bytes(out)


_SMALL_VARINTS = [_varint(n) for n in range(1 << 14)]
_MAX_VALUE = 1 << 28  # token ids and positions: four varint bytes at most


def _packed_varints(values: np.ndarray) -> List[bytes]:
  """Each row of ints in [0, 2^28) [B, L] as protobuf varints, all rows at once."""
  low, high = (values.min(), values.max()) if values.size else (0, 0)
  if low < 0 or high >= _MAX_VALUE:
    raise ValueError(f"feature values must lie in [0, {_MAX_VALUE}) to be written")
  if high < 0x80:  # one byte each: masks, segment ids, positions
    return [row.tobytes() for row in values.astype(np.uint8)]
  values = values.astype(np.uint32)
  num_bytes = (1 + (values >= 1 << 7) + (values >= 1 << 14) + (values >= 1 << 21))
  groups = np.stack([((values >> 7 * k) & 0x7F) | ((num_bytes > k + 1) << 7)
                     for k in range(4)], -1).astype(np.uint8)
  data = groups[np.arange(4) < num_bytes[..., None]].tobytes()
  ends = np.cumsum(num_bytes.sum(-1)).tolist()
  return [data[start:end] for start, end in zip([0] + ends[:-1], ends)]


def _field(number: int, payload: bytes) -> bytes:
  """A length-delimited protobuf field."""
  n = len(payload)
  return (_SMALL_VARINTS[number << 3 | 2] + (_SMALL_VARINTS[n] if n < 1 << 14 else _varint(n))
          + payload)


def serialize_examples(features: Dict[str, np.ndarray]) -> List[bytes]:
  """tf.train.Example bytes for each row of [B, L] arrays, encoded here in bulk (one
  protobuf object per row is slow). The wire format: Example.features(1) ->
  Features.feature(1, map entries: key 1, value 2) -> Feature.int64_list(3) or
  float_list(2) -> packed value(1)."""
  encoded = []
  for name, values in features.items():
    key = _field(1, name.encode("utf-8"))
    floats = values.dtype.kind == "f"
    rows = [row.tobytes() for row in values.astype("<f4")] if floats else _packed_varints(
        values)
    kind = 2 if floats else 3
    # Masks and segment ids take few distinct rows: their entries come from a cache.
    cached = kind == 3 and values.max(initial=0) < 0x80
    cache = _entry_cache.setdefault(name, {}) if cached else {}
    if len(cache) > 20_000:
      cache.clear()
    entries = []
    for row in rows:
      entry = cache.get(row)
      if entry is None:
        entry = _field(1, key + _field(2, _field(kind, _field(1, row))))
        if cached:
          cache[row] = entry
      entries.append(entry)
    encoded.append(entries)
  return [_field(1, b"".join(entries)) for entries in zip(*encoded)]


_entry_cache: Dict[str, Dict[bytes, bytes]] = {}
