"""The whole data step behind build_pretraining_dataset.py: corpus, vocab, TFRecords.

Layout under --data-dir (the original's): corpus/, vocab.txt, pretrain_tfrecords/.
Whatever is not given is made: the built-in default corpus (data_prep.default_corpus)
when there is no corpus, a vocabulary learned from the corpus when there is no vocab.
The text's normalisation (data_prep/normalization.py) is decided from the corpus for a
learned vocabulary, and written beside the data dir's vocab.txt.
"""

import collections
import dataclasses
import os
import time
from typing import Tuple

from data_prep import build as build_lib
from data_prep.build_config import BuildConfig
from data_prep import corpus as corpus_lib
from data_prep import default_corpus
from data_prep import normalization as normalization_lib
from data_prep import vocab as vocab_lib

DEFAULT_CORPUS_BYTES = 6 << 20  # about a minute of harvesting, a minute of building


def learn_vocab_from_corpus(corpus_dir: str, vocab_file: str, vocab_size: int,
                            lower_case: bool, accents: bool):
  """Counts BERT words over the corpus (streamed) and writes a learned vocab.txt."""
  from data_prep.tokenizer import LONG_WORD_MARK, basic_words
  counts = collections.Counter()
  for text in corpus_lib.read_texts(corpus_dir):
    counts.update(basic_words(text, lower_case, accents))
  counts.pop(LONG_WORD_MARK, None)  # the marker of over-long words, not a word
  vocab_lib.write_vocab(vocab_lib.learn_vocab(counts, vocab_size), vocab_file)


def learned_normalization(config: BuildConfig
                          ) -> Tuple[normalization_lib.Normalization, str]:
  """The normalisation of a vocabulary learned from the corpus, and why: the flags',
  else decided from the corpus's characters (a pass over it, streamed)."""
  counts, total = collections.Counter(), 0
  if config.strip_accents is None and config.do_lower_case is not False:
    total = sum(normalization_lib.count_characters(text.split("\n"), counts)
                for text in corpus_lib.read_texts(config.corpus_dir))
  return normalization_lib.decide_for_corpus(counts, total, config.do_lower_case,
                                             config.strip_accents)


def prepare(given: BuildConfig, data_dir: str = "data", vocab_size: int = 30522,
            log=print) -> build_lib.Stats:
  """The build of `given`, its empty paths those of the layout under `data_dir`, made
  first where they are missing (`vocab_size`: a learned vocabulary's)."""
  corpus_dir = given.corpus_dir or os.path.join(data_dir, "corpus")
  vocab_file = given.vocab_file or os.path.join(data_dir, "vocab.txt")
  output_dir = given.output_dir or os.path.join(data_dir, "pretrain_tfrecords")
  config = dataclasses.replace(given, corpus_dir=corpus_dir, vocab_file=vocab_file,
                               output_dir=output_dir)
  # Refuse a bad output dir before spending minutes on a corpus or a vocab.
  build_lib.check_output_dir(output_dir, config.overwrite)

  if not given.corpus_dir and not _has_files(corpus_dir):
    t0 = time.time()
    log(f"no corpus given: harvesting the built-in default corpus (Python documentation) "
        f"into {corpus_dir}")
    size = default_corpus.write_default_corpus(corpus_dir, DEFAULT_CORPUS_BYTES)
    log(f"  {size:,} bytes in {time.time() - t0:.0f}s")
  if not given.vocab_file and not os.path.exists(vocab_file):
    t0 = time.time()
    log(f"no vocab given: learning a {vocab_size}-token WordPiece vocabulary from "
        f"{corpus_dir} into {vocab_file}")
    normalization, reason = learned_normalization(config)
    log(f"  the text {normalization}: {reason}; "
        f"{normalization_lib.flag_that_changes(normalization)}")
    learn_vocab_from_corpus(corpus_dir, vocab_file, vocab_size, *normalization)
    normalization_lib.write(os.path.dirname(os.path.abspath(vocab_file)), normalization)
    log(f"  {len(vocab_lib.load_vocab(vocab_file)):,} tokens in {time.time() - t0:.0f}s")
  t0 = time.time()
  stats = build_lib.build(config)
  log(f"wrote {output_dir} in {time.time() - t0:.1f}s")
  vocab_folder = os.path.dirname(os.path.abspath(vocab_file))
  if not given.vocab_file and normalization_lib.read(vocab_folder) is None:
    # The data dir's vocabulary, read by the later steps: its normalisation beside it.
    normalization_lib.write(vocab_folder, normalization_lib.read(output_dir))
  build_lib.print_summary(stats, output_dir)
  return stats


def _has_files(folder: str) -> bool:
  return os.path.isdir(folder) and any(not name.startswith(".") for name in os.listdir(folder))
