"""Shows which word-pieces of a text ELECTRA's discriminator thinks were replaced.

  python -m tools.replaced_tokens --checkpoint DIR (--text "..." | --input FILE)
      [--json] [--corrupt [--seed N]] [--vocab FILE] [--cased]

What it prints and which models it reads: docs/deploying.md, "The discriminator as a
tool"; the work is in pretrain/replaced_tokens.py.
"""

import argparse
import contextlib
import json
import sys

from util import startup  # pylint: disable=unused-import  # first: sets TensorFlow's environment

from util import cli, hparams  # pylint: disable=wrong-import-position


def read_lines(path: str):
  try:
    with open(path, encoding="utf-8") as f:
      return f.read().splitlines()
  except OSError as e:
    raise ValueError(f"{path}: cannot read ({e.strerror})") from None
  except UnicodeDecodeError as e:
    raise ValueError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--checkpoint", required=True, help="the pre-trained model")
  source = parser.add_mutually_exclusive_group(required=True)
  source.add_argument("--text", help="the text to score")
  source.add_argument("--input", metavar="FILE", help="score each line of FILE")
  parser.add_argument("--json", action="store_true", help="JSON lines output")
  parser.add_argument("--corrupt", action="store_true",
                      help="let the generator replace 15%% of the word-pieces first")
  parser.add_argument("--seed", type=int, default=0, help="--corrupt's random seed")
  cli.add_vocab_flags(parser)
  args = parser.parse_args(argv)
  cli.check_flags(parser, args, seed=hparams.SEED)
  cli.check_given(parser, args, "checkpoint", "input")

  def score() -> int:
    from pretrain import replaced_tokens  # pylint: disable=g-import-not-at-top
    lines = [args.text] if args.input is None else read_lines(args.input)
    # What loading says (the text's normalisation read from the vocabulary, say) goes
    # to stderr: stdout holds the scores alone.
    with contextlib.redirect_stdout(sys.stderr):
      scorer = replaced_tokens.Scorer(args.checkpoint, args.vocab, args.cased,
                                      corrupt=args.corrupt)
    results = scorer.score(lines, args.seed if args.corrupt else None,
                           where=args.input or "--text")
    for i, scored in enumerate(results):
      if args.json:
        print(json.dumps({"line": i + 1, **scored.to_json()}, ensure_ascii=False))
      else:
        print(("\n" if i else "") + replaced_tokens.format_text(scored))
    return 0
  return cli.run_command(score)


if __name__ == "__main__":
  sys.exit(main())
