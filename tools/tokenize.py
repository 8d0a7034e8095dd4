"""Tokenizes a text file for inspection and outside checks: one JSON object per line.

    python -m tools.tokenize --vocab-file FILE [--no-lower-case] [--no-strip-accents]
        --input TEXT --output JSONL

Lines are split on "\\n" only (a trailing "\\r" stays part of the line's text); each
output line is {"tokens": [...], "ids": [...]}. Invalid UTF-8 is replaced by U+FFFD
(which BERT drops) and counted on stderr. The text is normalised as the vocabulary's
tokenizer_config.json records (where there is none, as its tokens show, said in one
line); the flags ask otherwise, for a vocabulary that records nothing.
"""

import argparse
import json
import os
import sys
from typing import Optional

from util import startup  # pylint: disable=unused-import  # first: sets TensorFlow's environment

from data_prep import corpus as corpus_lib  # pylint: disable=wrong-import-position
from data_prep import normalization  # pylint: disable=wrong-import-position
from data_prep.vocab import load_vocab  # pylint: disable=wrong-import-position
from util import cli  # pylint: disable=wrong-import-position
from util.files import atomic_write, check_output  # pylint: disable=wrong-import-position

def tokenize_file(vocab_file: str, input_path: str, output_path: str,
                  lower_case: Optional[bool] = None,
                  accents: Optional[bool] = None) -> int:
  """Writes the JSONL; returns the number of invalid UTF-8 bytes replaced. `lower_case`,
  `accents`: what the flags ask (None: nothing)."""
  from data_prep.tokenizer import Tokenizer
  if not os.path.isfile(input_path):
    raise ValueError(f"--input: {input_path} is not a file")
  check_output("--output", output_path, {"--input": input_path,
                                         "--vocab-file": vocab_file})
  vocab = load_vocab(vocab_file)
  tokenizer = Tokenizer(vocab, *normalization.of_model(
      vocab_file, lower_case=lower_case, strip_accents=accents,
      asked=normalization.as_flag))
  invalid = 0
  with atomic_write(output_path) as out:
    for block, _ in corpus_lib.read_blocks(corpus_lib.Span(input_path, 0,
                                                           os.path.getsize(input_path))):
      text, bad = corpus_lib.decode(block)
      invalid += bad
      lines = text.removesuffix("\n").split("\n")
      ids, offsets = tokenizer.batch_ids(lines)
      ids = ids.tolist()
      for i in range(len(lines)):
        row = ids[offsets[i]:offsets[i + 1]]
        out.write(json.dumps({"tokens": [vocab.tokens[t] for t in row], "ids": row},
                             ensure_ascii=False) + "\n")
  return invalid


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--vocab-file", required=True, help="BERT WordPiece vocab.txt")
  parser.add_argument("--input", required=True, help="UTF-8 text file")
  parser.add_argument("--output", required=True, help="JSONL file to write")
  parser.add_argument("--no-lower-case", dest="lower_case", action="store_false",
                      default=None)
  parser.add_argument("--no-strip-accents", dest="accents", action="store_false",
                      default=None)
  args = parser.parse_args(argv)
  cli.check_given(parser, args, "vocab_file", "input", "output")

  def tokenize() -> int:
    invalid = tokenize_file(args.vocab_file, args.input, args.output, args.lower_case,
                            args.accents)
    if invalid:
      print(f"{args.input}: {invalid} invalid UTF-8 bytes replaced by U+FFFD",
            file=sys.stderr)
    return 0
  return cli.run_command(tokenize)


if __name__ == "__main__":
  sys.exit(main())
