#!/usr/bin/env bash
# Quick start on a fresh machine, all on the CPU, about 3 minutes after set-up:
#   1. set up .venv (scripts/setup.sh);
#   2. build the default pre-training data: a corpus harvested from the installed Python
#      documentation, a vocabulary learned from it, TFRecords (data/);
#   3. pre-train a small ELECTRA for 60 steps, then evaluate it and export it.
# Re-running skips the data step when it is done and resumes training where it stopped.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}
PY=.venv/bin/python

if [ ! -f data/vocab.txt ] || ! ls data/pretrain_tfrecords/pretrain_data.tfrecord-* \
    >/dev/null 2>&1; then
  $PY build_pretraining_dataset.py
fi
$PY run_pretraining.py --model-name electra_small --hparams '{"num_train_steps": 60,
  "train_batch_size": 16, "num_warmup_steps": 10, "save_checkpoints_steps": 30,
  "log_every_steps": 5, "do_eval": true, "num_eval_steps": 10, "eval_batch_size": 16}'

cat <<'TEXT'

Done. Where things are:
  data/models/electra_small/training_curves.png    the loss and accuracy curves
  data/models/electra_small/results/               eval metrics (unsup_results.txt/.json)
  data/models/electra_small/export/                the generator and discriminator in the
                                                   original release's checkpoint format
  .venv/bin/tensorboard --logdir data/models/electra_small   the curves in TensorBoard
A real run: python run_pretraining.py --model-name electra_small (1M steps, as the paper).
TEXT
