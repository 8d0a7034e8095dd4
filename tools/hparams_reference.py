"""The hyperparameter reference, docs/hparams.md, written from the fields' declarations.

    python -m tools.hparams_reference --output docs/hparams.md

Every field of both phases is declared once, with `hparams.field`; this writes them as
one table per config. tests/test_hparams_reference.py checks that the committed page is
what this writes now.
"""

import argparse
import dataclasses
import json
import sys
import typing

from util import startup  # pylint: disable=unused-import  # first: sets TensorFlow's environment
from util import cli, hparams  # pylint: disable=g-import-not-at-top
from util.files import atomic_write  # pylint: disable=g-import-not-at-top

COMMAND = "python -m tools.hparams_reference --output docs/hparams.md"


def _type_name(kind) -> str:
  origin, args = typing.get_origin(kind), typing.get_args(kind)
  if origin is typing.Union:
    inner = [a for a in args if a is not type(None)]
    return _type_name(inner[0]) + " or null"
  if origin is dict:
    return "JSON object"
  if origin is list:
    return f"list of {_type_name(args[0])}"
  return getattr(kind, "__name__", str(kind))


def _cell(text: str) -> str:
  return text.replace("|", "\\|")


def table(cls, own_only: bool = False, record: bool = True) -> str:
  """A Markdown table of the fields of dataclass `cls` (`own_only`: those `cls` declares
  itself, in their order). `record`: with the columns of a run's record (whether a
  resumed run may change the field, whether an evaluation compares it)."""
  head = ["name", "type", "default", "allowed"]
  if record:
    head += ["on resume", "eval"]
  head.append("meaning")
  out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  names = hparams.settable_names(cls)  # not the fine-tuning config's sections
  fields = [f for f in dataclasses.fields(cls) if f.name in names]
  if own_only:
    order = list(vars(cls)["__annotations__"])
    fields = sorted((f for f in fields if f.name in order),
                    key=lambda f: order.index(f.name))
  for f in fields:
    if f.metadata.get("group"):
      out.append(f"| **{_cell(f.metadata['group'])}** |" + " |" * (len(head) - 1))
    default = (f.default if f.default_factory is dataclasses.MISSING
               else f.default_factory())
    allowed = f.metadata.get("allowed")
    row = [f"`{f.name}`", _type_name(f.type), f"`{json.dumps(default)}`",
           "-" if allowed is None else _cell(str(allowed))]
    if record:
      row += ["may change" if f.metadata.get("resumable") else "fixed",
              "compared" if f.metadata.get("meaning") else ""]
    row.append(_cell(f.metadata.get("help", "")))
    out.append("| " + " | ".join(row) + " |")
  return "\n".join(out)


INTRO = f"""\
# Hyperparameters

Every hyperparameter of both phases, as its declaration states it. Give them as
`--hparams '{{"name": value, ...}}'` (a JSON object or a JSON file); presets in
`configs/` set some per model size, and `configs/finetuning/task_defaults.json` per
task. Each value is checked by type and range when the config is built; a wrong name is
an error that suggests the closest one.

Columns: **allowed**, the values admitted beyond the type; **on resume**, whether a
re-run on the same model dir may change the field (*may change*: paths, logging,
hardware, the number of steps) or it fixes the trained weights (*fixed*: another value
is refused unless `"overwrite_model_dir": true`, which deletes the old run);
**eval**, *compared* when the field gives the trained weights their meaning, so that
evaluating a run (`"do_train": false`) checks it against the run's record.

This page is written from the declarations by
`{COMMAND}`
(`pretrain/config.py`, `finetune/config.py`, each family's `family.py`,
`training/settings.py`, `model/config.py`); regenerate it when a field changes.
"""


def reference() -> str:
  # pylint: disable=g-import-not-at-top  # the configs load without TensorFlow
  from finetune import tasks
  from finetune.config import FinetuningConfig
  from model.config import ModelChoice, ModelConfig
  from pretrain.config import PretrainingConfig
  from training.settings import RunFields, ScaleSettings
  families = [f for f in tasks.FAMILIES if f.settings]
  parts = [INTRO,
           "## Pre-training (`run_pretraining.py`)\n",
           "Defaults are the original's; `configs/pretraining/<size>.json` overrides "
           "them per model size. The run, hardware and model fields below apply too.\n",
           table(PretrainingConfig, own_only=True),
           "\n## Fine-tuning (`run_finetuning.py`)\n",
           "Defaults are the original's; `configs/finetuning/<size>.json` overrides "
           "them per model size, then the task's defaults. The run, hardware and model "
           "fields below apply too, and each task family's section (below) to the "
           "runs of its tasks.\n",
           table(FinetuningConfig, own_only=True),
           "\nA family's fields are given flat in `--hparams` like the others. Only "
           "the sections of the run's task families sign and are recorded in its run "
           "record; a field of another family is checked, then unused (one "
           "`--hparams` file may serve several tasks' runs)."]
  for family in families:
    parts += [f"\n### The {family.name} family's section\n",
              table(family.settings)]
  parts += ["\n## Both phases: the run\n",
            table(RunFields),
            "\n## Both phases: the hardware\n",
            "None of these changes the trained weights.\n",
            table(ScaleSettings),
            "\n## Both phases: the model\n",
            "A field a phase declares itself (above) takes the place of the one "
            "here.\n",
            table(ModelChoice),
            "\n## The model's sizes\n",
            "Set by `model_size` (`configs/model_sizes.json`), `embedding_size`, "
            "`vocab_size` and `model_hparam_overrides`; the same names as the "
            "original's BertConfig. A run's sizes fix its trained weights.\n",
            table(ModelConfig, record=False)]
  return "\n".join(parts) + "\n"


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--output", help="write here instead of standard output")
  args = parser.parse_args(argv)
  cli.check_given(parser, args, "output")

  def write() -> int:
    page = reference()
    if args.output:
      with atomic_write(args.output) as f:
        f.write(page)
    else:
      sys.stdout.write(page)
    return 0
  return cli.run_command(write)


if __name__ == "__main__":
  sys.exit(main())
