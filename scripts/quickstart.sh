#!/usr/bin/env bash
# Quick start on a fresh machine, all on the CPU, a few minutes after set-up (README):
#   1. set up .venv (scripts/setup.sh);
#   2. build the default pre-training data: a corpus harvested from the installed Python
#      documentation, an 8,192-token vocabulary learned from it, TFRecords (data/);
#   3. pre-train the small-budget recipe (configs/pretraining/tiny.json: a 4-layer,
#      128-wide ELECTRA) for a few minutes, then evaluate it and export it.
# Re-running skips the data step when it is done and resumes training where it stopped.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}
PY=.venv/bin/python

if [ ! -f data/vocab.txt ] || ! ls data/pretrain_tfrecords/pretrain_data.tfrecord-* \
    >/dev/null 2>&1; then
  $PY build_pretraining_dataset.py --vocab-size 8192
fi
$PY run_pretraining.py --model-name electra_tiny --hparams '{"num_train_steps": 400,
  "save_checkpoints_steps": 100, "log_every_steps": 20, "do_eval": true,
  "num_eval_steps": 20, "eval_batch_size": 64}'

cat <<'TEXT'

Done. Where things are:
  data/models/electra_tiny/training_curves.png    the loss and accuracy curves
  data/models/electra_tiny/results/               eval metrics (unsup_results.txt/.json)
  data/models/electra_tiny/export/                the generator and discriminator in the
                                                   original release's checkpoint format
  .venv/bin/tensorboard --logdir data/models/electra_tiny   the curves in TensorBoard
The whole CPU recipe: python run_pretraining.py --model-name electra_tiny (5,000 steps)
Longer, as bench/RESULTS.md's long run (20,000 steps, about 2 h on 2 cores; at its end the
generator's masked_lm_accuracy 0.36, the discriminator's disc_auc_fixed 0.83 against
0.50-0.60 in the first 2,000 steps: python -m tools.eval_checkpoints measures it):
  python run_pretraining.py --model-name electra_tiny --hparams '{"num_train_steps": 20000,
    "disc_lr_multiplier": 0.3, "disc_warmup_steps": 2000}'
A real run: python run_pretraining.py --model-name electra_small (1M steps, as the paper).
TEXT
