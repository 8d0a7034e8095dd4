"""The hyperparameter reference, docs/hparams.md, written from the fields' declarations.

    python -m tools.hparams_reference --output docs/hparams.md

Every field of both phases is declared once, with `hparams.field` (its type, default,
allowed values and part in a run's record) and usually a comment above it that says
what it does. This writes them as one table per config: pre-training, fine-tuning, each
task family's own fields, the fields both phases share and the model's sizes. A field's
meaning is its comment (the lines just above it, or at the end of its line); a field
without one, most of them the original's, takes its line from MEANINGS below.
tests/test_hparams_reference.py checks that the committed page is what this writes now.
"""

import argparse
import ast
import dataclasses
import inspect
import io
import json
import sys
import textwrap
import tokenize
import typing
from typing import Dict, List, Optional, Tuple

from util import startup  # pylint: disable=unused-import  # first: sets TensorFlow's environment
from util import cli, hparams  # pylint: disable=g-import-not-at-top
from util.files import atomic_write  # pylint: disable=g-import-not-at-top

COMMAND = "python -m tools.hparams_reference --output docs/hparams.md"

# Meanings of the fields declared without a comment (the original's, mostly), by name.
# A comment beside a field's declaration wins over these.
MEANINGS = {
    # Both phases.
    "model_name": "The run's name, one plain folder name: its model dir is "
                  "`<data_dir>/models/<model_name>`; it also picks the size preset "
                  "(electra_small, electra_base, ...).",
    "data_dir": "Where the data and the models live, in the original's layout.",
    "seed": "Seed of the start, the data order, the masking and dropout.",
    "learning_rate": "Peak learning rate (fine-tuning: the top layer's).",
    "weight_decay_rate": "AdamW's weight decay (LayerNorm weights and biases excluded).",
    "max_seq_length": "Word-pieces per sequence.",
    "train_batch_size": "Sequences per training step, over all devices (the global batch).",
    "eval_batch_size": "Sequences per evaluation batch.",
    "save_checkpoints_steps": "Steps between checkpoints.",
    "log_every_steps": "Steps between log lines (train_log.jsonl, TensorBoard, progress).",
    "vocab_file": "The vocabulary (empty: the original layout's vocab.txt).",
    "model_dir": "Checkpoints, logs and results (empty: the original layout's).",
    "do_train": "Train; false evaluates the saved model only.",
    # Pre-training.
    "do_eval": "Evaluate after training (pre-training: results/unsup_results.txt and "
               ".json; fine-tuning: the dev split).",
    "gen_weight": "Weight of the generator's masked-LM loss.",
    "disc_weight": "Weight of the discriminator's replaced-token loss.",
    "mask_prob": "Share of each sequence's word-pieces masked.",
    "lr_decay_power": "Power of the learning rate's decay to 0 at num_train_steps "
                      "(1: linear).",
    "num_warmup_steps": "Steps over which the learning rate rises linearly from 0.",
    "num_train_steps": "Training steps in all; raise it to continue a finished run.",
    "num_eval_steps": "Batches evaluated.",
    "keep_checkpoint_max": "Checkpoints kept on disk.",
    "uniform_generator": "The generator samples uniformly (the paper's baseline).",
    "two_tower_generator": "The generator is Electric's two-tower cloze model (set by "
                           "objective electric).",
    "untied_generator_embeddings": "The generator has embeddings of its own instead of "
                                   "sharing the discriminator's.",
    "untied_generator": "Generator and discriminator are two encoders (false: one "
                        "encoder plays both).",
    "generator_layers": "The generator's layers, as a fraction of the discriminator's.",
    "generator_hidden_size": "The generator's width, as a fraction of the "
                             "discriminator's.",
    "disallow_correct": "The generator's samples never repeat the original token.",
    "temperature": "Temperature of the generator's sampling.",
    "pretrain_tfrecords": "The records' file pattern (empty: "
                          "`<data_dir>/pretrain_tfrecords/pretrain_data.tfrecord*`).",
    "init_checkpoint": "Start from these weights: a release name, a Hugging Face id or "
                       "directory, an original checkpoint or a run's model dir.",
    # Fine-tuning.
    "task_names": "The tasks (--task); several train together.",
    "num_trials": ("Runs with different seeds (seed, seed + 1, ..., wrapped round to 0 "
                   "past 4294967295); each is reported, and their median."),
    "layerwise_lr_decay": "Each layer learns at this times the rate of the layer above.",
    "num_train_epochs": "Passes over the training data.",
    "warmup_proportion": "Share of the steps over which the learning rate rises from 0.",
    "write_test_outputs": "Write GLUE's submission files for the test split.",
    "n_writes_test": "Trials that write test outputs (the first ones).",
    "results_dir": "Scores (empty: `<data_dir>/models/<model_name>/results`).",
    # Question answering.
    "max_query_length": "Word-pieces of the question kept.",
    "doc_stride": "Step, in word-pieces, between the windows of a long context.",
    "n_best_size": "Candidate answers kept per question (the n-best file).",
    "max_answer_length": "Longest answer, in word-pieces.",
    "answerable_classifier": "A head that says whether the question has an answer "
                             "(SQuAD 2.0-style tasks).",
    "answerable_uses_start_logits": "The answerable head reads the start logits too.",
    "answerable_weight": "Weight of the answerable head's loss.",
    "joint_prediction": "The end is predicted given the start, with a beam (the "
                        "original's joint head).",
    "beam_size": "Starts and ends the joint head's beam keeps.",
    "qa_na_threshold": "No answer when the null odds are above this.",
    # The hardware.
    "distribution_strategy": "Devices: default, one_device, mirrored (one machine's "
                             "GPUs), multi_worker (machines named by TF_CONFIG), tpu.",
    "tpu_address": "The TPU, with distribution_strategy tpu.",
    "mixed_precision": "float32, or bfloat16 or float16 arithmetic with float32 weights.",
    "use_xla": "Compile the training step with XLA.",
    # The model, as both phases name it.
    "model_size": "The size preset of configs/model_sizes.json (small, base, large, "
                  "tiny, debug).",
    "model_hparam_overrides": "Sizes changed from the preset (the model's fields, "
                              "below).",
    "embedding_size": "Width of the embeddings (null: the preset's).",
    "vocab_size": "Rows of the embeddings; follows vocab_file when left at its default.",
    # The model's sizes.
    "hidden_size": "Width of the transformer layers.",
    "num_hidden_layers": "Transformer layers.",
    "num_attention_heads": "Attention heads (the presets: hidden_size / 64).",
    "intermediate_size": "Width of the feed-forward layer (the presets: 4 x "
                         "hidden_size).",
    "hidden_dropout_prob": "Dropout of the embeddings and of each sublayer's output.",
    "attention_probs_dropout_prob": "Dropout of the attention weights.",
    "max_position_embeddings": "Position embeddings: the longest sequence.",
    "type_vocab_size": "Segment embeddings.",
    "initializer_range": "Standard deviation of the truncated-normal start.",
}


def _comments(cls) -> Tuple[Dict[str, str], Dict[str, str]]:
  """({field: its comment}, {field: the heading of its group}) read from `cls`'s
  source. A field's comment is the comment lines just above it, or the comment at the end
  of its line; a single comment line after a blank line heads a group instead."""
  lines, _ = inspect.getsourcelines(cls)
  source = textwrap.dedent("".join(lines))
  rows = source.splitlines()
  comment_at = {}  # line number (1-based) -> the comment's text
  for token in tokenize.generate_tokens(io.StringIO(source).readline):
    if token.type == tokenize.COMMENT:
      comment_at[token.start[0]] = token.string.lstrip("#").strip()
  full_line = {n for n in comment_at if rows[n - 1].lstrip().startswith("#")}
  meanings, groups = {}, {}
  group = ""
  for node in ast.parse(source).body[0].body:
    if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
      continue
    name = node.target.id
    above = []
    n = node.lineno - 1
    while n in full_line:
      above.insert(0, comment_at[n])
      n -= 1
    if len(above) == 1 and (n == 0 or not rows[n - 1].strip()):
      group, above = above[0].rstrip("."), []
    trailing = [comment_at[k] for k in range(node.lineno, node.end_lineno + 1)
                if k in comment_at and k not in full_line]
    text = " ".join(above + trailing)
    if text:
      meanings[name] = text[0].upper() + text[1:]
    groups[name] = group
  return meanings, groups


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


def _default(f: dataclasses.Field) -> str:
  if f.default is not dataclasses.MISSING:
    value = f.default
  elif f.default_factory is not dataclasses.MISSING:
    value = f.default_factory()
  else:
    return "-"
  return f"`{json.dumps(value)}`"


def _allowed(f: dataclasses.Field) -> str:
  allowed = f.metadata.get("allowed")
  return _cell(str(allowed)) if allowed is not None else "-"


def _owner(cls, name: str):
  """The class of `cls`'s bases that declares field `name` last (the one in force)."""
  return next(c for c in cls.__mro__ if name in vars(c).get("__annotations__", {}))


def _cell(text: str) -> str:
  return text.replace("|", "\\|")


def table(cls, own: Optional[List[type]] = None, record: bool = True) -> str:
  """A Markdown table of the fields of dataclass `cls` declared by `cls` itself or one of
  `own` (every field when `own` is None). `record`: with the columns of a run's record
  (whether a resumed run may change the field, whether an evaluation compares it)."""
  notes = {}
  for klass in reversed(cls.__mro__):
    if dataclasses.is_dataclass(klass) and klass is not object:
      meanings, groups = _comments(klass)
      for name in vars(klass).get("__annotations__", {}):
        notes[name] = (meanings.get(name), groups.get(name, ""))
  head = ["name", "type", "default", "allowed"]
  if record:
    head += ["on resume", "eval"]
  head.append("meaning")
  out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  group = ""
  names = hparams.settable_names(cls)  # not the fine-tuning config's sections
  fields = [f for f in dataclasses.fields(cls) if f.name in names]
  if own is not None:  # in the order of the declarations, the class's own first
    owners = [cls] + list(own)
    fields = [f for f in fields if _owner(cls, f.name) in owners]
    fields.sort(key=lambda f: (owners.index(_owner(cls, f.name)), list(
        vars(_owner(cls, f.name))["__annotations__"]).index(f.name)))
  for f in fields:
    meaning, heading = notes.get(f.name, (None, ""))
    if heading and heading != group:
      out.append(f"| **{_cell(heading)}** |" + " |" * (len(head) - 1))
    group = heading
    row = [f"`{f.name}`", _type_name(f.type), _default(f), _allowed(f)]
    if record:
      row += ["may change" if f.metadata.get("resumable") else "fixed",
              "compared" if f.metadata.get("meaning") else ""]
    row.append(_cell(meaning or MEANINGS.get(f.name, "")))
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
  """The whole page."""
  # pylint: disable=g-import-not-at-top  # the configs load without TensorFlow
  from finetune import tasks
  from finetune.config import FinetuningConfig
  from model.config import ModelChoice, ModelConfig
  from pretrain.config import PretrainingConfig
  from training.settings import ScaleSettings
  families = [f for f in tasks.FAMILIES if f.settings]
  parts = [INTRO,
           "## Pre-training (`run_pretraining.py`)\n",
           "Defaults are the original's; `configs/pretraining/<size>.json` overrides "
           "them per model size. The hardware and model fields below apply too.\n",
           table(PretrainingConfig, own=[]),
           "\n## Fine-tuning (`run_finetuning.py`)\n",
           "Defaults are the original's; `configs/finetuning/<size>.json` overrides "
           "them per model size, then the task's defaults. The hardware and model "
           "fields below apply too, and each task family's section (below) to the "
           "runs of its tasks.\n",
           table(FinetuningConfig, own=[]),
           "\nA family's fields are given flat in `--hparams` like the others. Only "
           "the sections of the run's task families sign and are recorded in its run "
           "record; a field of another family is checked, then unused (one "
           "`--hparams` file may serve several tasks' runs)."]
  for family in families:
    parts += [f"\n### The {family.name} family's section\n",
              table(family.settings)]
  parts += ["\n## Both phases: the hardware\n",
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
