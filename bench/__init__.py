"""Benchmarks a user runs by hand from the repository's root as `python -m bench.<name>`
(tests run tiny versions); results in bench/RESULTS.md. One-off studies live in
experiments/, the tools the docs send users to in tools/.

The library's packages never import this one: benches use the seams the commands use
(Pretrainer and Finetuner.train_loop, TrainLoop.train_step and iterator, the phases'
dataset_fn), so what they time is what the commands run.
"""

import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DATA = os.path.join(os.path.dirname(ROOT), "shared", "data")
# BERT's uncased vocabulary: 30,522 tokens, the presets' vocab_size.
BERT_VOCAB = os.path.join(SHARED_DATA, "vocab", "bert_uncased_vocab.txt")
