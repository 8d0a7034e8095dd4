"""Writes a model as a Hugging Face transformers ELECTRA directory.

  python -m tools.export_hf --checkpoint DIR --output HF_DIR
      [--part discriminator|generator] [--vocab FILE] [--cased]

DIR is a pre-trained checkpoint in the original format (run_pretraining.py's export/,
a released model, or a prefix): its discriminator becomes ElectraForPreTraining, its
generator (--part generator) ElectraForMaskedLM. DIR may also be a fine-tuned model
directory (<model_dir>_<trial>, holding finetuning_config.json): a sentence task's
becomes ElectraForSequenceClassification with the task's labels (a regression for
STS-B-like tasks), a tagging task's ElectraForTokenClassification, a QA task's
ElectraForQuestionAnswering (fine-tuned with joint_prediction false, and for SQuAD
2.0-style tasks answerable_classifier false: transformers' head has neither). HF_DIR receives config.json, model.safetensors, vocab.txt, tokenizer_config.json
and special_tokens_map.json, each file whole or not at all (export/huggingface.py).
Nothing here needs torch.
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
