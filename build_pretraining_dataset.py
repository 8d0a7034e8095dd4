"""Writes text data as TFRecords that ELECTRA can be pre-trained on.

With no arguments: harvests the built-in default corpus into data/corpus/, learns
data/vocab.txt and writes data/pretrain_tfrecords/. The flags are the original's plus
--seed, --num-out-files, --static-masking, --mask-prob, --overwrite, --data-dir and
--vocab-size.
"""

import argparse
import dataclasses
import sys

from util import startup  # pylint: disable=unused-import  # first: sets TensorFlow's environment

from data_prep import prepare  # pylint: disable=wrong-import-position
from data_prep.build_config import BuildConfig  # pylint: disable=wrong-import-position
from util import cli  # pylint: disable=wrong-import-position


def _bool(text: str) -> bool:
  # The original used type=bool, which reads "False" as True.
  if text.lower() in ("1", "true", "yes"):
    return True
  if text.lower() in ("0", "false", "no"):
    return False
  raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def parse_args(argv=None) -> argparse.Namespace:
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--data-dir", default="data",
                      help="root of the default layout: corpus/, vocab.txt, "
                           "pretrain_tfrecords/ (default: data)")
  parser.add_argument("--corpus-dir", default="", help="directory of text files: one sentence or "
                      "paragraph per line, blank lines between documents (default: "
                      "<data-dir>/corpus, harvested from Python's documentation if absent)")
  parser.add_argument("--vocab-file", default="", help="BERT WordPiece vocab.txt (default: "
                      "<data-dir>/vocab.txt, learned from the corpus if absent)")
  parser.add_argument("--output-dir", default="", help="where the TFRecords go (default: "
                      "<data-dir>/pretrain_tfrecords)")
  parser.add_argument("--vocab-size", type=int,
                      help="size of a learned vocabulary (default: 30522)")
  parser.add_argument("--max-seq-length", type=int, default=128,
                      help="tokens per example (default: 128)")
  parser.add_argument("--num-processes", type=int, default=1,
                      help="processes to split the corpus between (default: 1)")
  parser.add_argument("--blanks-separate-docs", type=_bool, default=True,
                      help="whether blank lines end documents (default: true)")
  parser.add_argument("--do-lower-case", dest="do_lower_case", action="store_true",
                      help="lower-case the text (default: as the vocabulary is; a "
                           "learned one is lower-cased)")
  parser.add_argument("--no-lower-case", dest="do_lower_case", action="store_false")
  parser.add_argument("--do-strip-accents", dest="strip_accents", action="store_true",
                      help="strip accents when lower-casing (default: as the vocabulary "
                           "is; a learned one keeps them when its corpus has letters "
                           "that stripping changes, as Hangul or kana: "
                           "docs/pretraining.md)")
  parser.add_argument("--no-strip-accents", dest="strip_accents", action="store_false")
  parser.add_argument("--seed", type=int, default=0,
                      help="random seed of example packing and static masking; the same "
                           "seed and process count give the same bytes (default: 0)")
  parser.add_argument("--num-out-files", type=int,
                      help="number of TFRecord files (default: one per 8 MB of text, a "
                           "multiple of --num-processes)")
  parser.add_argument("--static-masking", action="store_true",
                      help="also write masked_lm_positions/ids/weights, with input_ids "
                           "masked, for readers that expect pre-masked data")
  parser.add_argument("--mask-prob", type=float,
                      help="masking probability of --static-masking (default: 0.15)")
  parser.add_argument("--overwrite", action="store_true",
                      help="replace the contents of a non-empty --output-dir")
  parser.add_argument("--no-progress", dest="progress", action="store_false",
                      help="no progress lines")
  parser.set_defaults(do_lower_case=None, strip_accents=None)
  args = parser.parse_args(argv)
  if args.do_lower_case is False and args.strip_accents:
    parser.error("--do-strip-accents strips accents when lower-casing, and "
                 "--no-lower-case keeps the text as it is; give one of them")
  # A flag the other one makes unused is refused, not silently dropped.
  if args.mask_prob is not None and not args.static_masking:
    parser.error("--mask-prob is the masking probability of --static-masking; give both "
                 "or neither")
  if args.vocab_size is not None and args.vocab_file:
    parser.error("--vocab-size is the size of a vocabulary learned from the corpus, "
                 "unused with --vocab-file; give one of them")
  args.mask_prob = 0.15 if args.mask_prob is None else args.mask_prob
  args.vocab_size = 30522 if args.vocab_size is None else args.vocab_size
  return args


def main(argv=None) -> int:
  args = parse_args(argv)

  def build() -> int:
    config = BuildConfig(**{f.name: getattr(args, f.name)  # checked here, in one line
                            for f in dataclasses.fields(BuildConfig)})
    prepare.prepare(config, args.data_dir, args.vocab_size)
    return 0
  return cli.run_command(build)


if __name__ == "__main__":
  sys.exit(main())
