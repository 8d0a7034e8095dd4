"""The pre-training TFRecord contract, defined once for the writer and every reader.

Names, dtypes and lengths are the original release's (int64 features of length
max_seq_length), so its reader parses our files and ours parses its files. Files written
with --static-masking carry three more features of length max_predictions_per_seq.
"""

from typing import Dict, Optional

import tensorflow as tf

SEQUENCE_FEATURES = ("input_ids", "input_mask", "segment_ids")
STATIC_MASK_FEATURES = ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")
FILE_PATTERN = "pretrain_data.tfrecord-{index}-of-{count}"


def feature_spec(max_seq_length: int, max_predictions_per_seq: Optional[int] = None
                 ) -> Dict[str, tf.io.FixedLenFeature]:
  """The parsing spec; include the static-mask features when their length is given."""
  spec = {name: tf.io.FixedLenFeature([max_seq_length], tf.int64)
          for name in SEQUENCE_FEATURES}
  if max_predictions_per_seq is not None:
    spec["masked_lm_positions"] = tf.io.FixedLenFeature([max_predictions_per_seq],
                                                        tf.int64)
    spec["masked_lm_ids"] = tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64)
    spec["masked_lm_weights"] = tf.io.FixedLenFeature([max_predictions_per_seq],
                                                      tf.float32)
  return spec
