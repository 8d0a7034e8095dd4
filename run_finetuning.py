"""Fine-tunes a pre-trained ELECTRA discriminator on downstream tasks.

  python run_finetuning.py --task glue/mnli [--model-name NAME | --init-checkpoint PATH]
      [--data-dir DIR] [--hparams JSON-or-file]

  python run_finetuning.py --task T [same flags as training] --predict FILE [--output OUT]

Tasks are named as TensorFlow Datasets names them (glue/sst2, glue/stsb, conll2003, ...)
or as the original did (sst, sts, ...); several tasks train together when separated by
commas. A user's own task (TSV/CSV sentences, or CoNLL/JSON-lines tagging) is given as
the path of its JSON description. A GLUE, SQuAD, CoNLL named-entity or XTREME POS task
whose files are not under <data-dir>/finetuning_data is downloaded and prepared by
TensorFlow Datasets (into the tfds_data_dir hyperparameter, else TFDS's default).

--predict runs the model that the same flags fine-tuned on FILE, the task's input format
without labels (its test TSV/CSV layout; SQuAD JSON or JSON lines of {"question",
"context"}; for tagging one sentence per line, or JSON lines of {"words"} in a .jsonl
file), and writes one JSON line per input to OUT (default: standard output).
"""

import argparse
import shlex
import sys
from typing import Dict

from util import startup  # pylint: disable=unused-import  # first: sets TensorFlow's environment

from finetune import config as finetune_config  # pylint: disable=g-import-not-at-top
from finetune import tasks  # pylint: disable=g-import-not-at-top
from util import cli, files, hparams  # pylint: disable=g-import-not-at-top


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--task", required=True,
                      help="task name(s), comma separated, or a task .json file")
  parser.add_argument("--model-name", default="electra_small")
  parser.add_argument("--init-checkpoint", default="",
                      help="pre-trained checkpoint (prefix or directory), or a Hugging "
                      "Face ELECTRA (or BERT) directory")
  parser.add_argument("--data-dir", default="data")
  parser.add_argument("--hparams", default="", help="JSON object or JSON file")
  parser.add_argument("--predict", default="", metavar="FILE",
                      help="predict on FILE with the model these flags fine-tuned")
  parser.add_argument("--output", default="", metavar="OUT",
                      help="--predict's JSON lines go here (default: standard output)")
  args = parser.parse_args(argv)
  if args.output and not args.predict:
    parser.error("--output is where --predict writes; give --predict FILE too")

  def finetune() -> int:
    # TensorFlow loads after flag parsing, so --help and flag errors are instant (the
    # config and the task registry load without it).
    from finetune import trainer  # pylint: disable=g-import-not-at-top
    overrides = hparams.parse_hparams(args.hparams)
    hparams.set_from_flag(overrides, "init_checkpoint", args.init_checkpoint,
                          "--init-checkpoint")
    config = finetune_config.load_config(args.model_name, args.task.split(","),
                                         args.data_dir, overrides,
                                         elsewhere={"pre-training (run_pretraining.py)":
                                                    pretraining_config})
    if args.predict:
      return predict(config, args)
    report = trainer.run(config)
    print(f"results: {config.results_file('txt')}")
    if report.get("plot"):
      print(f"dev curves: {report['plot']}")
    return 0
  return cli.run_command(finetune)


def pretraining_config():
  from pretrain.config import PretrainingConfig  # pylint: disable=g-import-not-at-top
  return PretrainingConfig


def training_command(args) -> str:
  """The command line that fine-tunes the model --predict asks for."""
  flags = ["--task", args.task, "--model-name", args.model_name]
  for flag, value in (("--init-checkpoint", args.init_checkpoint),
                      ("--data-dir", args.data_dir), ("--hparams", args.hparams)):
    if value:
      flags += [flag, value]
  return shlex.join(["python", "run_finetuning.py"] + flags)


def inputs(config, args) -> Dict[str, str]:
  """Every path the command reads, by the flag or hparam naming it."""
  read = {"--predict": args.predict, "--init-checkpoint": config.init_checkpoint,
          "vocab_file": config.vocab_file}
  if not args.hparams.strip().startswith("{"):
    read["--hparams"] = args.hparams.strip()
  for name in config.task_names:
    if tasks.is_task_file(name):
      read["--task"] = name
    read.update(tasks.data_paths(tasks.get_task(name), config.data_dir))
  return read


def predict(config, args) -> int:
  from finetune import predict as predict_lib  # pylint: disable=g-import-not-at-top
  from finetune import trainer  # pylint: disable=g-import-not-at-top
  log = lambda message: print(message, file=sys.stderr)
  if args.output:  # before the model runs: a long run must not end refusing its output
    files.check_output("--output", args.output, inputs(config, args))
  try:
    if args.output:
      with files.atomic_write(args.output) as out:
        predict_lib.predict_file(config, args.predict, out, log)
      log(f"predictions: {args.output}")
    else:
      predict_lib.predict_file(config, args.predict, sys.stdout, log)
  except trainer.NotFinetunedError as e:
    print(f"error: {e}; fine-tune it first: {training_command(args)}", file=sys.stderr)
    return 2
  return 0


if __name__ == "__main__":
  sys.exit(main())
