"""A model dir: the name of every file a run keeps in it, and every write into it.

Both phases, the loop and the tools name a model dir's files from here and write them
through here only (util/files.py's atomic_write and atomic_directory; the training log
appended a row at a time; TensorBoard's folders): tests/test_layering.py checks that
nothing outside runs/ writes into a model dir. No TensorFlow at import: the tools read
a record without it.
"""

import contextlib
import json
import os
import shutil
from typing import Dict, Optional

from data_prep import normalization
from util import files

# Each phase's record (runs/record.py reads and checks them).
PRETRAINING_RECORD = "pretrain_config.json"
FINETUNING_RECORD = "finetuning_config.json"
# The loop's: its training checkpoints ckpt-<step> (runs/checkpoints.py), their state
# file, each worker's input position and the other workers' scratch copies; TensorBoard's
# training scalars, the JSON-lines log (one row per step) and its curves' PNG.
CHECKPOINT_NAME = "ckpt"
CHECKPOINT_STATE = "checkpoint"
DATA_STATE = "data_state"
WORKER_SCRATCH = ".worker_tmp"
TRAIN_BOARD = "train"
LOG_NAME = "train_log.jsonl"
CURVES_NAME = "training_curves.png"
LOOP_FILES = (CHECKPOINT_STATE, f"{CHECKPOINT_NAME}-*", DATA_STATE, WORKER_SCRATCH,
              TRAIN_BOARD, LOG_NAME, CURVES_NAME)
# Pre-training's: one JSON object per evaluated checkpoint ("global_step" and the eval
# metrics), TensorBoard's eval scalars, the results, and the exports (export/ and
# export/step_<step>, the original's format).
EVAL_CURVE_NAME = "eval_curve.jsonl"
EVAL_BOARD = "eval"
RESULTS_TXT = os.path.join("results", "unsup_results.txt")
EXPORT_DIR = "export"
PRETRAINING_FILES = (*LOOP_FILES, EXPORT_DIR, EVAL_BOARD, EVAL_CURVE_NAME,
                     os.path.splitext(RESULTS_TXT)[0] + ".*", normalization.FILE)
# What fine-tuning writes in the pre-trained model's folder (finetune/config.py's
# model_dir and results_dir), which stays.
FINETUNING_OUTPUTS = ("finetuning_models", "results")
# A fine-tuning trial's: the copy of the vocabulary it read (its record names it), each
# epoch's dev scores ([{"epoch", "step", "scores"}], as first taken, with that epoch's
# weights) and the serving SavedModel.
RUN_VOCAB = "vocab.txt"
EPOCH_SCORES = "epoch_scores.json"
SAVED_MODEL = "saved_model"
TRIAL_FILES = (*LOOP_FILES, RUN_VOCAB, normalization.FILE, SAVED_MODEL, EPOCH_SCORES)


def write(model_dir: str, name: str, content) -> str:
  """<model_dir>/<name> holding `content` (text, bytes, or any other value as JSON),
  written atomically; its path."""
  path = os.path.join(model_dir, name)
  binary = isinstance(content, bytes)
  with files.atomic_write(path, "wb" if binary else "w") as f:
    f.write(content if binary or isinstance(content, str)
            else json.dumps(content, indent=2, sort_keys=True))
  return path


def append_row(model_dir: str, name: str, row: Dict):
  """One JSON line appended to <model_dir>/<name> (the training log)."""
  with open(os.path.join(model_dir, name), "a", encoding="utf-8") as f:
    f.write(json.dumps(row) + "\n")


def summary_writer(model_dir: str, name: str):
  """TensorBoard's writer of <model_dir>/<name> (TRAIN_BOARD, EVAL_BOARD)."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  return tf.summary.create_file_writer(os.path.join(model_dir, name))


def folder(model_dir: str, name: str, what: str = "a write"):
  """A new folder to write <model_dir>/<name> into, which takes its place whole when
  the block succeeds (util/files.py's atomic_directory)."""
  return files.atomic_directory(os.path.join(model_dir, name), what=what)


@contextlib.contextmanager
def export_folder(model_dir: str, step: Optional[int] = None):
  """A new folder to write the export into (export/, or export/step_<step> for a kept
  training checkpoint's), which takes its place whole when the block succeeds; export/
  written again keeps the step folders it holds."""
  name = os.path.join(EXPORT_DIR, "" if step is None else f"step_{step}")
  with folder(model_dir, name, "an export") as new:
    yield new
    path = os.path.realpath(os.path.join(model_dir, name))
    kept = os.listdir(path) if step is None and os.path.isdir(path) else []
    for step_folder in (n for n in kept if n.startswith("step_")):  # linked, not copied
      shutil.copytree(os.path.join(path, step_folder), os.path.join(new, step_folder),
                      copy_function=os.link)


def drop_log_rows_after(model_dir: str, step: int):
  """Removes the training log's rows of steps after `step` (atomically): a run resumed
  from an older checkpoint redoes them, and the log keeps one row per step."""
  path = os.path.join(model_dir, LOG_NAME)
  if not os.path.exists(path):
    return
  with open(path, encoding="utf-8") as f:
    lines = f.readlines()
  kept = [line for line in lines if not line.strip() or json.loads(line)["step"] <= step]
  if len(kept) != len(lines):
    write(model_dir, LOG_NAME, "".join(kept))
