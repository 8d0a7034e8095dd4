"""Building the pre-training TFRecords: corpus -> tokens -> packed examples -> shards.

Each process takes one byte range of the corpus (data_prep.corpus.split_work), tokenizes
it a block of lines (about 1 MB of text) at a time, packs examples with its own seeded
random stream, and writes the shards i with i % num_processes == its index, round-robin,
as the original did. So the output depends on the seed and the process count only, never
on scheduling; and memory depends on the block size and the longest line, never on the
corpus size.

Everything is written under a temporary directory beside the output directory and moved
into place at the end: a reader sees the old shards or the new ones, never a mix, and a
failed or interrupted run leaves nothing behind. Workers stop when their parent dies,
and the temporary directory of a killed build is removed by the next one.
"""

import collections
import contextlib
import dataclasses
import math
import multiprocessing
import os
import queue as queue_lib
import random
import re
import signal
import sys
import threading
import time
from typing import Dict, List

import numpy as np

from data_prep import corpus as corpus_lib
from data_prep import examples as examples_lib
from data_prep import lines as lines_lib
from data_prep import normalization as normalization_lib
from data_prep import records
from data_prep.build_config import BuildConfig, Stats
from data_prep.vocab import Vocab, load_vocab
from util import cli
from util import files as files_lib
from util.progress import Progress, format_count

MASK_BATCH = 512
LONG_LINE_FACTOR = 10  # a line of more word-pieces than this x max_seq_length is warned of
TEXT_BYTES_PER_SHARD = 8 << 20  # default --num-out-files: a shard per 8 MB of text
MAX_DEFAULT_SHARDS = 1000
TEMP_INFIX = ".tmp-"  # <output dir>.tmp-<pid>: a build's work in progress
# Over this share of [UNK] tokens, the vocabulary is warned of as not the corpus's (a
# corpus's own vocabulary leaves far fewer: bench/RESULTS.md, "Figures moved from code
# comments").
UNK_WARNING_SHARE = 0.05


class BuildError(ValueError):
  """Flags or files that make the build impossible."""


def default_num_out_files(corpus_bytes: int, num_processes: int) -> int:
  shards = min(MAX_DEFAULT_SHARDS, max(1, math.ceil(corpus_bytes / TEXT_BYTES_PER_SHARD)))
  return max(num_processes, math.ceil(shards / num_processes) * num_processes)


def with_normalization(config: BuildConfig) -> BuildConfig:
  """The config with the pair the build normalises the text with: the one the
  vocabulary's folder records (the flags may not contradict it), else the one its tokens
  show, the flags given deciding what they name (normalization.settle)."""
  pair = normalization_lib.settle(config.vocab_file, (), config.do_lower_case,
                                  config.strip_accents, asked=normalization_lib.as_flag)
  return dataclasses.replace(config, **pair.fields())


def check_output_dir(output_dir: str, overwrite: bool):
  if os.path.exists(output_dir) and not os.path.isdir(output_dir):
    raise BuildError(f"--output-dir: {output_dir} is a file, not a directory")
  if os.path.isdir(output_dir) and os.listdir(output_dir):
    if not overwrite:
      raise BuildError(f"--output-dir: {output_dir} is not empty; pass --overwrite to "
                       "replace its contents")
    others = [name + ("/" if os.path.isdir(os.path.join(output_dir, name)) else "")
              for name in os.listdir(output_dir) if not _is_built(name)]
    if others:
      raise BuildError(
          f"--output-dir: {output_dir} also holds what a build does not write "
          f"({cli.listed(others)}); --overwrite replaces a build's shards only: move "
          "those elsewhere, or choose another --output-dir")
  parent = os.path.dirname(os.path.abspath(output_dir))
  try:
    files_lib.make_folder(parent, output_dir)
  except OSError as e:
    raise BuildError(f"--output-dir: cannot create {parent}: {e.strerror}") from None
  if not os.access(parent, os.W_OK):
    raise BuildError(f"--output-dir: cannot write in {parent}")


def _is_built(name: str) -> bool:
  shard = records.FILE_PATTERN.format(index=r"\d+", count=r"\d+").replace(".", r"\.")
  return name == normalization_lib.FILE or re.fullmatch(shard, name) is not None


def build(config: BuildConfig) -> Stats:
  """Writes the TFRecords of `config`; returns the summed statistics."""
  check_output_dir(config.output_dir, config.overwrite)
  config = with_normalization(config)  # the vocabulary refused here if it must be
  files = corpus_lib.list_files(
      config.corpus_dir, note=lambda line: print(line, file=sys.stderr, flush=True))
  corpus_bytes = sum(os.path.getsize(path) for path in files)
  num_out_files = config.num_out_files or default_num_out_files(corpus_bytes,
                                                                config.num_processes)
  if num_out_files < config.num_processes:
    raise BuildError(f"--num-out-files: {num_out_files} is fewer than --num-processes "
                     f"{config.num_processes}; each process needs a file")
  parts = corpus_lib.split_work(files, config.num_processes)

  output_dir = os.path.abspath(config.output_dir)
  tmp_name = f"{os.path.basename(output_dir)}{TEMP_INFIX}{os.getpid()}"
  try:
    # Beside the output dir (the final rename stays on one disk), named by the pid; a
    # killed build's is removed here.
    with files_lib.atomic_directory(output_dir, tmp_name, what="a build") as tmp_dir:
      stats = _run_jobs(config, parts, num_out_files, tmp_dir, corpus_bytes)
      if stats.examples == 0:
        raise BuildError(f"--corpus-dir: {config.corpus_dir} holds no text (blank lines "
                         "only)")
      normalization_lib.write(tmp_dir, config.normalization)
      # Again: something may have appeared meanwhile.
      check_output_dir(output_dir, config.overwrite)
    if stats.long_lines:
      print(long_line_warning(stats, config.max_seq_length), file=sys.stderr, flush=True)
    if stats.unk_tokens > UNK_WARNING_SHARE * stats.tokens:
      print(f"warning: {_pct(stats.unk_tokens, stats.tokens)} of the corpus's tokens are "
            f"[UNK] (over {UNK_WARNING_SHARE:.0%}): the vocabulary {config.vocab_file} is "
            f"likely not of this corpus's language or casing (the text "
            f"{config.normalization}); the summary's \"not in the vocabulary\" names the "
            "characters it lacks", file=sys.stderr, flush=True)
  except OSError as e:
    raise BuildError(f"writing {config.output_dir} failed: {cli.error_message(e)}; "
                     "nothing was written") from None
  except KeyboardInterrupt:
    raise cli.Interrupted(f"nothing was written; {config.output_dir} is as it "
                          "was") from None
  return stats


def _run_jobs(config, parts, num_out_files, tmp_dir, corpus_bytes) -> Stats:
  progress = Progress("build", corpus_bytes, "B") if config.progress else None
  done_bytes, done_tokens = [0] * len(parts), [0] * len(parts)

  def report(job, file_bytes, tokens, force=False):
    done_bytes[job], done_tokens[job] = file_bytes, tokens
    if progress:
      elapsed = max(time.time() - progress.t0, 1e-9)
      progress.update(sum(done_bytes), {
          "tokens": format_count(sum(done_tokens)),
          "tokens/s": format_count(sum(done_tokens) / elapsed)}, force=force)

  jobs = [(config, job, part, num_out_files, tmp_dir) for job, part in enumerate(parts)]
  total = Stats()
  if len(jobs) == 1:
    total.add(write_part(*jobs[0], report=report))
  else:
    # Spawned (not forked) workers: TensorFlow (static masking) does not survive a fork.
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    with _children_ignore_ctrl_c():
      pool = ctx.Pool(len(jobs), initializer=_init_worker, initargs=(queue, os.getpid()))
    with pool:
      pending = pool.starmap_async(_write_part_in_worker, jobs)
      while not pending.ready():
        _drain(queue, report, timeout=0.5)
      for stats in pending.get():
        total.add(stats)
      _drain(queue, report, timeout=0)
  report(0, done_bytes[0], done_tokens[0], force=True)
  return total


def _drain(queue, report, timeout):
  try:
    while True:
      report(*queue.get(timeout=timeout))
  except queue_lib.Empty:
    pass


@contextlib.contextmanager
def _children_ignore_ctrl_c():
  """Processes started in the block ignore SIGINT from birth (an ignored signal stays
  ignored across exec, and Python then installs no KeyboardInterrupt handler): Ctrl-C
  reaches the whole process group, and the parent alone answers it, stopping the pool."""
  if threading.current_thread() is not threading.main_thread():
    yield  # only the main thread may set handlers; Ctrl-C goes there anyway
    return
  previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
  try:
    yield
  finally:
    signal.signal(signal.SIGINT, previous)


def _exit_with_parent(parent_pid: int):
  """A worker's watch: a killed parent cannot stop it, so it stops itself."""
  while os.getppid() == parent_pid:
    time.sleep(1)
  os._exit(1)


_worker_queue = None


def _init_worker(queue, parent_pid: int):
  global _worker_queue
  _worker_queue = queue
  threading.Thread(target=_exit_with_parent, args=(parent_pid,), daemon=True).start()
  # One thread each if static masking brings in TensorFlow: the processes are the
  # parallelism. (Set before TensorFlow is imported, so nothing imports it here.)
  os.environ["TF_NUM_INTRAOP_THREADS"] = os.environ["TF_NUM_INTEROP_THREADS"] = "1"


def _write_part_in_worker(config, job, spans, num_out_files, tmp_dir):
  return write_part(config, job, spans, num_out_files, tmp_dir,
                    report=lambda *args: _worker_queue.put(args))


def write_part(config: BuildConfig, job: int, spans: List[corpus_lib.Span],
               num_out_files: int, out_dir: str, report=None) -> Stats:
  """One process's work: its spans of the corpus into its shards of `out_dir`, by
  `config` with its normalisation settled (with_normalization)."""
  from data_prep.tokenizer import Tokenizer

  vocab = load_vocab(config.vocab_file)
  normalization = config.normalization
  tokenizer = Tokenizer(vocab, *normalization)
  # Characters counted one by one: those of lines that are not ASCII, and the ASCII
  # ones the vocabulary lacks.
  characters = collections.Counter()
  watched = normalization_lib.absent_ascii(vocab.tokens, normalization)
  builder = examples_lib.ExampleBuilder(config.max_seq_length, vocab.cls_id, vocab.sep_id,
                                        random.Random(config.seed * 1_000_003 + job))
  stats = Stats()
  long_line = LONG_LINE_FACTOR * config.max_seq_length
  add_line, end_document = builder.add_line, builder.end_document
  start, start_cpu = time.time(), time.process_time()
  last_report = start
  with records.ShardWriter(out_dir, job, config.num_processes, num_out_files) as writer:
    batches = ExampleBatches(config, job, vocab, writer)
    for batch, file_bytes, place in lines_lib.line_batches(
        spans, config.blanks_separate_docs, stats):
      texts = [line for line in batch if line is not None]
      stats.characters += normalization_lib.count_characters(texts, characters, watched)
      ids, offsets, lengths = lines_lib.tokenize_batch(tokenizer, texts, stats)
      if lengths.size and lengths.max() > long_line:
        _count_long_lines(batch, place, lengths, long_line, stats)
      row = 0
      for line in batch:  # the hot loop: a few hundred thousand lines per second
        if line is None:  # a document boundary
          example = end_document()
        else:
          example = add_line(ids[offsets[row]:offsets[row + 1]])
          row += 1
        if example is not None:
          batches.add(example, stats)
      stats.file_bytes += file_bytes
      if report and time.time() - last_report > 1:
        last_report = time.time()
        report(job, stats.file_bytes, stats.tokens)
    batches.flush()
  stats.changed_characters = normalization_lib.changed(characters, normalization)
  stats.absent_characters = normalization_lib.absent(characters, vocab.tokens,
                                                     normalization)
  stats.single_segment = builder.single_segment
  stats.short_target = builder.short_target
  stats.loop_seconds = time.time() - start
  stats.loop_cpu_seconds = time.process_time() - start_cpu
  if report:
    report(job, stats.file_bytes, stats.tokens)
  return stats


def _count_long_lines(batch, place, lengths, long_line: int, stats: Stats):
  stats.long_lines += int(np.count_nonzero(lengths > long_line))
  if not stats.long_line_place:
    first = int(np.argmax(lengths > long_line))  # among the batch's non-blank lines
    stats.long_line_place = place([i for i, line in enumerate(batch)
                                   if line is not None][first])
    stats.long_line_tokens = int(lengths[first])


def long_line_warning(stats: Stats, max_seq_length: int) -> str:
  """The one warning about lines far longer than an example (the original's rule cuts
  them, which a statistics row alone does not make plain)."""
  room = max_seq_length - 2
  dropped = 1 - room / stats.long_line_tokens
  more = stats.long_lines - 1
  return (f"warning: {stats.long_line_place}: a line of {stats.long_line_tokens:,} "
          f"word-pieces; as in the original, it goes into one example of at most "
          f"{room:,}, so at least {dropped:.2%} of it is dropped"
          + (f" ({more:,} more line(s) of over {LONG_LINE_FACTOR}x --max-seq-length)"
             if more else "") + "; put one sentence or paragraph per line")


class ExampleBatches:
  """Packed examples to feature arrays, MASK_BATCH at a time, with static masks if asked,
  handed to the shard writer."""

  def __init__(self, config: BuildConfig, job: int, vocab: Vocab,
               writer: records.ShardWriter):
    self.config, self.job, self.vocab, self.writer = config, job, vocab, writer
    self.pending: List[examples_lib.Example] = []
    self.mask_batches = 0

  def add(self, example: examples_lib.Example, stats: Stats):
    stats.examples += 1
    stats.dropped_tokens += example.num_dropped
    stats.real_positions += example.num_real
    stats.positions += len(example.input_ids)
    self.pending.append(example)
    if len(self.pending) >= MASK_BATCH:
      self.flush()

  def flush(self):
    if not self.pending:
      return
    position = np.arange(self.config.max_seq_length)[None]
    num_real = np.array([e.num_real for e in self.pending])[:, None]
    a_end = np.array([e.a_end for e in self.pending])[:, None]
    features = {
        "input_ids": np.array([e.input_ids for e in self.pending], np.int64),
        "input_mask": (position < num_real).astype(np.int64),
        "segment_ids": ((position >= a_end) & (position < num_real)).astype(np.int64)}
    if self.config.static_masking:
      features.update(self._mask(features["input_ids"], features["input_mask"]))
    self.writer.write(features)
    self.pending = []

  def _mask(self, input_ids, input_mask) -> Dict[str, np.ndarray]:
    """BERT-style pre-masked features, drawn by data_prep.masking, the rules pre-training
    masks by (which need TensorFlow: imported only for --static-masking)."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    from data_prep import masking  # pylint: disable=g-import-not-at-top
    v = self.vocab
    masked = masking.mask_inputs(
        input_ids, input_mask, mask_prob=self.config.mask_prob,
        max_predictions=records.max_predictions_per_seq(self.config.mask_prob,
                                                        self.config.max_seq_length),
        mask_id=v.mask_id, special_ids=[v.cls_id, v.sep_id, v.mask_id],
        seed=tf.constant([self.config.seed, (self.job << 32) + self.mask_batches],
                         tf.int64))
    self.mask_batches += 1
    # MaskedInputs' fields are the records' names, in their order.
    return {name: value.numpy() for name, value in masked._asdict().items()}


def print_summary(stats: Stats, output_dir: str):
  files = sorted(name for name in os.listdir(output_dir)
                 if name != normalization_lib.FILE)
  size = sum(os.path.getsize(os.path.join(output_dir, name)) for name in files)
  normalization = normalization_lib.read(output_dir)
  rows = [
      ("documents", f"{stats.documents:,}"),
      ("lines", f"{stats.lines:,}"),
      ("tokens", f"{stats.tokens:,} ({stats.dropped_tokens:,} cut by max length)"),
      ("examples", f"{stats.examples:,} ({_pct(stats.single_segment, stats.examples)} "
                   f"single-segment, {_pct(stats.short_target, stats.examples)} "
                   "short target)"),
      ("normalisation", f"{normalization} "
                        f"({normalization_lib.flag_that_changes(normalization)})"),
      ("changed beyond case", normalization_lib.describe(stats.changed_characters,
                                                         stats.characters)),
      ("not in the vocabulary", normalization_lib.describe(stats.absent_characters,
                                                           stats.characters)),
      ("[UNK] rate", _pct(stats.unk_tokens, stats.tokens)),
      ("padding rate", _pct(stats.positions - stats.real_positions, stats.positions)),
      ("invalid UTF-8 bytes replaced", f"{stats.invalid_bytes:,}"),
      ("files", f"{len(files)} in {output_dir}"),
      ("bytes", f"{size:,}"),
  ]
  width = max(len(name) for name, _ in rows)
  for name, value in rows:
    print(f"{name:<{width}}  {value}")


def _pct(part: int, whole: int) -> str:
  return f"{100.0 * part / whole:.2f}%" if whole else "n/a"
