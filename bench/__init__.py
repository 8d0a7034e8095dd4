"""Benchmarks a user runs by hand from the repository's root as `python -m bench.<name>`
(tests run tiny versions); results in bench/RESULTS.md. One-off studies live in
experiments/, the tools the docs send users to in tools/.

The library's packages never import this one: benches use the seams the commands use
(Pretrainer and Finetuner.train_loop, TrainLoop.train_step (the step) and its iterator,
the phases' dataset_fn), so what they time is what the commands run.

Their flags are checked as they are parsed, as the tools' are: numbers by
util/cli.py's check_flags, files by check_files and lists by choice_list here; a
failing child process is one line (bench/child.py's ChildFailed).
"""

import argparse
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DATA = os.path.join(os.path.dirname(ROOT), "shared", "data")
# BERT's uncased vocabulary: 30,522 tokens, the presets' vocab_size.
BERT_VOCAB = os.path.join(SHARED_DATA, "vocab", "bert_uncased_vocab.txt")


def choice_list(choices):
  """An argparse type: a comma-separated list of `choices` (repeats dropped); argparse
  refuses anything else in one line naming the flag, with the choices."""
  def parse(text: str):
    values = list(dict.fromkeys(v.strip() for v in text.split(",")))
    wrong = [v for v in values if v not in choices]
    if wrong:
      raise argparse.ArgumentTypeError(
          f"{wrong[0]!r}: expected a comma-separated list of "
          f"{', '.join(choices)}")
    return values
  return parse


def check_files(parser, args, *dests: str) -> None:
  """Refuses (parser.error) a flag naming no file, which a bench would otherwise meet
  minutes in, in a child process (not for a flag left at a default of None)."""
  for dest in dests:
    value = getattr(args, dest)
    if value is not None and not os.path.isfile(value):
      parser.error(f"--{dest.replace('_', '-')} {value}: "
                   f"{'a directory' if os.path.isdir(value) else 'no such file'}; "
                   "expected a file")
