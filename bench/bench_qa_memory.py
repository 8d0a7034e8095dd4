"""Peak memory of SQuAD fine-tuning: electra_small, seq 512, by batch size and accumulation.

  python -m bench.bench_qa_memory [--settings 8x1,16x1,32x1,32x4] [--steps 3]

Runs by hand, never in CI. Each setting BATCHxACCUMULATION runs in its own process
(bench/child.py, so its peak RSS, from getrusage, is its own): the real training step
of run_finetuning.py for SQuAD 2.0 (bench/steps.py: Finetuner.train_loop's model, AdamW
with layer-wise learning rates, the joint span head with the answerability classifier
and its loss; TrainLoop.train_step) on random token ids and answer positions, for
--steps steps after one untimed step (tracing). gradient_accumulation_steps splits each
batch into micro-batches whose gradients are summed, so the activations held at once
are those of batch / accumulation examples. Prints one JSON line per setting.
"""

import argparse
import json
import sys
import tempfile

from bench import child
from bench.steps import finetuning_step, time_steps
from util import cli

SEQ, VOCAB = 512, 30522


def run_setting(batch: int, accumulation: int, steps: int, recompute: bool = False
                ) -> dict:
  import numpy as np  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(0)
  ids = rng.integers(1000, VOCAB, (batch, SEQ)).astype(np.int32)
  segments = np.zeros_like(ids)
  segments[:, 64:] = 1  # a question, then the context
  starts = rng.integers(64, SEQ - 30, batch).astype(np.int32)
  features = {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": segments,
              "start_positions": starts, "end_positions": starts + 5,
              "is_impossible": np.zeros(batch, np.int32)}
  with tempfile.TemporaryDirectory() as folder:
    _, step = finetuning_step("squad/v2.0", features, 1 + steps, {
        "model_size": "small", "train_batch_size": batch, "max_seq_length": SEQ,
        "gradient_accumulation_steps": accumulation, "recompute": recompute}, folder)
    seconds = time_steps(step, steps) / steps
  return {"batch": batch, "accumulation": accumulation, "seq": SEQ, "recompute": recompute,
          "seconds_per_step": round(seconds, 2)}


def settings_list(text: str) -> list:
  """--settings: (batch, accumulation) pairs from comma-separated BATCHxACCUMULATION."""
  try:
    settings = [tuple(int(n) for n in item.split("x")) for item in text.split(",")]
  except ValueError:
    settings = []
  if not settings or any(len(s) != 2 or min(s) < 1 for s in settings):
    raise argparse.ArgumentTypeError(
        f"{text!r}: expected comma-separated BATCHxACCUMULATION of integers >= 1, such "
        "as 8x1,32x4")
  return settings


def parse_args(argv=None) -> argparse.Namespace:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--settings", type=settings_list, default="8x1,16x1,32x1,32x4",
                      help="comma-separated BATCHxACCUMULATION")
  parser.add_argument("--steps", type=int, default=3)
  parser.add_argument("--recompute", action="store_true",
                      help="gradient checkpointing of the transformer layers")
  args = parser.parse_args(argv)
  cli.check_flags(parser, args, steps={"at_least": 1})
  return args


def main(argv=None) -> int:
  args = parse_args(argv)
  return cli.run_command(lambda: measure_settings(args))


def measure_settings(args: argparse.Namespace) -> int:
  """Each setting in its own process, one JSON line each (a failed one: its line)."""
  for batch, accumulation in args.settings:
    setting = f"{batch}x{accumulation}"
    try:
      result = child.measure(run_setting, {"batch": batch, "accumulation": accumulation,
                                           "steps": args.steps,
                                           "recompute": args.recompute})
    except child.ChildFailed as e:
      result = {"setting": setting, "error": str(e)}
    print(json.dumps(result), flush=True)
  return 0


if __name__ == "__main__":
  sys.exit(main())
