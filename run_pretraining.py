"""Pre-trains an ELECTRA model: `python run_pretraining.py --model-name electra_small`.

Flags as the original (--data-dir, --model-name, --hparams JSON or a JSON file); the
data-dir layout is the original's: <data-dir>/pretrain_tfrecords, <data-dir>/vocab.txt,
<data-dir>/models/<model-name>. Re-running the same command resumes from the last
checkpoint. The work is done by pretrain/trainer.py.
"""

import argparse
import sys

from util import startup  # pylint: disable=unused-import  # first: sets TensorFlow's environment


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--data-dir", default="data",
                      help="holds pretrain_tfrecords/, vocab.txt and models/ (default: "
                      "data)")
  parser.add_argument("--model-name", required=True,
                      help="name of the run; checkpoints go to <data-dir>/models/<name>")
  parser.add_argument("--hparams", default="",
                      help="JSON object (or a JSON file) of hyperparameters to override")
  parser.add_argument("--init-checkpoint", default="",
                      help="start from this pre-trained pair: an original-format checkpoint "
                      "(prefix or directory) or a folder holding Hugging Face "
                      "discriminator and generator directories")
  parser.add_argument("--export-steps", default="",
                      help="also export these kept training checkpoints (comma-separated "
                      "steps) to <model_dir>/export/step_<step>, e.g. to fine-tune from "
                      "part of a run")
  args = parser.parse_args(argv)
  try:
    export_steps = [int(s) for s in args.export_steps.split(",") if s.strip()]
  except ValueError:
    export_steps = [0]
  if any(step < 1 for step in export_steps):
    parser.error(f"--export-steps {args.export_steps!r}: expected training steps (at "
                 "least 1) such as 1000,2000")

  from util import cli  # pylint: disable=g-import-not-at-top

  def finetuning_config():
    from finetune.config import FinetuningConfig  # pylint: disable=g-import-not-at-top
    return FinetuningConfig

  def pretrain() -> int:
    # TensorFlow loads after flag parsing, so --help and flag errors are instant.
    from pretrain import config as pretrain_config  # pylint: disable=g-import-not-at-top
    from pretrain import trainer  # pylint: disable=g-import-not-at-top
    from util import hparams  # pylint: disable=g-import-not-at-top
    overrides = hparams.parse_hparams(args.hparams)
    hparams.set_from_flag(overrides, "init_checkpoint", args.init_checkpoint,
                          "--init-checkpoint")
    config = pretrain_config.load_config(args.model_name, args.data_dir, overrides,
                                         elsewhere={"fine-tuning (run_finetuning.py)":
                                                    finetuning_config})
    trainer.run(config, export_steps)
    return 0
  return cli.run_command(pretrain)


if __name__ == "__main__":
  sys.exit(main())
