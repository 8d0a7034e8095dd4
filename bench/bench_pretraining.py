"""Pre-training throughput: steps/s, tokens/s and peak memory of the real training step.

Runs the same compiled step as run_pretraining.py (util/training.py's TrainLoop with the
pretrain/objective.py model and model/optimization.py optimizer) on random token ids,
after one untimed step (tracing). Prints one JSON line per configuration.

  python bench/bench_pretraining.py --model-size small --batch-size 128 --steps 5
  python bench/bench_pretraining.py --mixed-precision mixed_bfloat16 --use-xla  # GPU
"""

import argparse
import json
import os
import resource
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position
import tensorflow as tf  # pylint: disable=g-import-not-at-top,wrong-import-position

from data_prep import feature_spec  # pylint: disable=wrong-import-position
from pretrain import trainer  # pylint: disable=wrong-import-position
from pretrain.config import load_config  # pylint: disable=wrong-import-position

VOCAB = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..",
                     "shared", "data", "vocab", "bert_uncased_vocab.txt")


def write_random_data(folder: str, seq_length: int, vocab_size: int, count: int = 512):
  rng = np.random.default_rng(0)
  path = os.path.join(folder, "pretrain_tfrecords",
                      feature_spec.FILE_PATTERN.format(index=0, count=1))
  os.makedirs(os.path.dirname(path))
  with tf.io.TFRecordWriter(path) as writer:
    for _ in range(count):
      ids = [101] + rng.integers(1000, vocab_size, seq_length - 2).tolist() + [102]
      feature = lambda v: tf.train.Feature(int64_list=tf.train.Int64List(value=v))
      writer.write(tf.train.Example(features=tf.train.Features(feature={
          "input_ids": feature(ids), "input_mask": feature([1] * seq_length),
          "segment_ids": feature([0] * seq_length)})).SerializeToString())


def peak_gpu_bytes() -> int:
  if not tf.config.list_physical_devices("GPU"):
    return 0
  return tf.config.experimental.get_memory_info("GPU:0")["peak"]


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--model-size", default="small")
  parser.add_argument("--batch-size", type=int, default=128)
  parser.add_argument("--seq-length", type=int, default=128)
  parser.add_argument("--steps", type=int, default=5)
  parser.add_argument("--mixed-precision", default="float32")
  parser.add_argument("--use-xla", action="store_true")
  parser.add_argument("--vocab-file", default=VOCAB)
  args = parser.parse_args()

  with tempfile.TemporaryDirectory() as folder:
    with open(args.vocab_file, encoding="utf-8") as f:
      vocab_size = sum(1 for _ in f)
    with open(os.path.join(folder, "vocab.txt"), "w", encoding="utf-8") as f:
      f.write(open(args.vocab_file, encoding="utf-8").read())
    write_random_data(folder, args.seq_length, vocab_size)
    config = load_config(f"electra_{args.model_size}", folder, {
        "model_size": args.model_size, "train_batch_size": args.batch_size,
        "max_seq_length": args.seq_length, "mixed_precision": args.mixed_precision,
        "use_xla": args.use_xla, "num_train_steps": args.steps + 1,
        "num_warmup_steps": 1, "vocab_size": vocab_size})
    pretrainer = trainer.Pretrainer(config)
    loop = pretrainer.loop
    # The loop's own step function, timed without checkpoints or logs.
    step_fn = loop._build_step(distributed=False)  # pylint: disable=protected-access
    iterator = iter(pretrainer._dataset_fn(  # pylint: disable=protected-access
        args.batch_size, training_data=True)(loop.input_context()))
    float(step_fn(iterator)["loss"])  # tracing and the first step
    start = time.perf_counter()
    for _ in range(args.steps):
      loss = step_fn(iterator)["loss"]
    float(loss)
    elapsed = time.perf_counter() - start
  steps_per_s = args.steps / elapsed
  print(json.dumps({
      "model": f"electra_{args.model_size}", "batch": args.batch_size,
      "seq": args.seq_length, "precision": args.mixed_precision, "xla": args.use_xla,
      "device": "GPU" if tf.config.list_physical_devices("GPU") else "CPU",
      "steps_per_s": round(steps_per_s, 4),
      "tokens_per_s": round(steps_per_s * args.batch_size * args.seq_length),
      "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
      "peak_gpu_mib": round(peak_gpu_bytes() / 2**20)}))


if __name__ == "__main__":
  main()
