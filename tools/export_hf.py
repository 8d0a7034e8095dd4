"""Writes a model as a Hugging Face transformers ELECTRA directory.

  python -m tools.export_hf --checkpoint DIR --output HF_DIR
      [--part discriminator|generator] [--vocab FILE] [--cased]

DIR is a pre-trained checkpoint in the original format (run_pretraining.py's export/,
a released model, or a prefix) or a fine-tuned trial dir (<model_dir>_<trial>); which
transformers class each becomes, and which fine-tuned heads are refused:
docs/deploying.md. Every file is written whole or not at all (export/huggingface.py);
nothing here needs torch.
"""

import argparse
import sys

from util import startup  # pylint: disable=unused-import  # first: sets TensorFlow's environment

from export import huggingface  # pylint: disable=wrong-import-position
from util import cli  # pylint: disable=wrong-import-position


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--checkpoint", required=True,
                      help="original-format checkpoint, or a fine-tuned model directory")
  parser.add_argument("--output", required=True, help="the Hugging Face directory")
  parser.add_argument("--part", choices=("discriminator", "generator"), default="",
                      help="of a pre-trained checkpoint (default: discriminator)")
  cli.add_vocab_flags(parser)
  args = parser.parse_args(argv)
  cli.check_given(parser, args, "checkpoint", "output")

  def write() -> int:
    kind = huggingface.export(args.checkpoint, args.output, args.part, args.vocab,
                              args.cased)
    print(f"wrote {args.output} ({kind})")
    return 0
  return cli.run_command(write)


if __name__ == "__main__":
  sys.exit(main())
