"""Fine-tunes a pre-trained ELECTRA discriminator on downstream tasks.

  python run_finetuning.py --task glue/mnli [--model-name NAME | --init-checkpoint PATH]
      [--data-dir DIR] [--hparams JSON-or-file]

Tasks are named as TensorFlow Datasets names them (glue/sst2, glue/stsb, ...) or as the
original did (sst, sts, ...); several tasks train together when separated by commas. A
user's own TSV/CSV task is given as the path of its JSON description. A GLUE or SQuAD
task whose files are not under <data-dir>/finetuning_data is downloaded and prepared by
TensorFlow Datasets (into the tfds_data_dir hyperparameter, else TFDS's default).
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from finetune import config as finetune_config  # pylint: disable=g-import-not-at-top
from finetune import trainer  # pylint: disable=g-import-not-at-top
from util import cli, hparams  # pylint: disable=g-import-not-at-top


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--task", required=True,
                      help="task name(s), comma separated, or a task .json file")
  parser.add_argument("--model-name", default="electra_small")
  parser.add_argument("--init-checkpoint", default="",
                      help="pre-trained checkpoint (prefix or directory)")
  parser.add_argument("--data-dir", default="data")
  parser.add_argument("--hparams", default="", help="JSON object or JSON file")
  args = parser.parse_args(argv)

  def finetune() -> int:
    overrides = hparams.parse_hparams(args.hparams)
    if args.init_checkpoint:
      overrides["init_checkpoint"] = args.init_checkpoint
    config = finetune_config.load_config(args.model_name, args.task.split(","),
                                         args.data_dir, overrides)
    report = trainer.run(config)
    print(f"results: {config.results_file('txt')}")
    if report.get("plot"):
      print(f"dev curves: {report['plot']}")
    return 0
  return cli.run_command(finetune)


if __name__ == "__main__":
  sys.exit(main())
