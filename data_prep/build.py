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

import contextlib
import dataclasses
import math
import multiprocessing
import os
import queue as queue_lib
import random
import shutil
import signal
import sys
import threading
import time
from typing import Dict, List, Optional

import numpy as np
import tensorflow as tf

from data_prep import corpus as corpus_lib
from data_prep import examples as examples_lib
from data_prep.feature_spec import FILE_PATTERN
from data_prep.vocab import Vocab, VocabError, load_vocab
from util import cli
from util.progress import Progress, format_count

MASK_BATCH = 512
GIANT_LINE_CHARS = 1 << 20  # longer lines are tokenized a piece at a time
TEXT_BYTES_PER_SHARD = 8 << 20  # default --num-out-files: a shard per 8 MB of text
MAX_DEFAULT_SHARDS = 1000
TEMP_INFIX = ".tmp-"  # <output dir>.tmp-<pid>: a build's work in progress


class BuildError(ValueError):
  """Flags or files that make the build impossible."""


@dataclasses.dataclass(frozen=True)
class BuildConfig:
  corpus_dir: str
  vocab_file: str
  output_dir: str
  max_seq_length: int = 128
  num_processes: int = 1
  blanks_separate_docs: bool = True
  do_lower_case: bool = True
  strip_accents: bool = True
  seed: int = 0
  num_out_files: Optional[int] = None
  static_masking: bool = False
  mask_prob: float = 0.15
  overwrite: bool = False
  progress: bool = True


@dataclasses.dataclass
class Stats:
  """What one process did; summed over processes for the closing summary."""
  documents: int = 0
  lines: int = 0
  tokens: int = 0
  unk_tokens: int = 0
  dropped_tokens: int = 0  # cut by truncation to max_seq_length
  examples: int = 0
  single_segment: int = 0
  short_target: int = 0
  real_positions: int = 0
  positions: int = 0
  invalid_bytes: int = 0
  file_bytes: int = 0  # of the corpus files read (compressed bytes of compressed files)
  loop_seconds: float = 0.0  # in the tokenize-pack-write loop, the slowest process's
  loop_cpu_seconds: float = 0.0  # CPU time in that loop, all processes together

  def add(self, other: "Stats"):
    for field in dataclasses.fields(self):
      combine = max if field.name == "loop_seconds" else sum
      setattr(self, field.name, combine((getattr(self, field.name),
                                         getattr(other, field.name))))


def default_num_out_files(corpus_bytes: int, num_processes: int) -> int:
  shards = min(MAX_DEFAULT_SHARDS, max(1, math.ceil(corpus_bytes / TEXT_BYTES_PER_SHARD)))
  return max(num_processes, math.ceil(shards / num_processes) * num_processes)


def check_vocab_case(vocab: Vocab, lower_case: bool):
  """A cased vocab with lower-casing (or the reverse) is almost surely a mistake."""
  words = [t for t in vocab.tokens if not (t.startswith("[") and t.endswith("]"))]
  cased = sum(t != t.lower() for t in words)
  if lower_case and cased > 0.01 * len(words):
    raise VocabError(f"{vocab.path}: a cased vocabulary ({cased} tokens with capitals) "
                     "used with --do-lower-case; pass --no-lower-case, or use an "
                     "uncased vocab.txt")
  if not lower_case and cased == 0:
    raise VocabError(f"{vocab.path}: an uncased vocabulary used with --no-lower-case: "
                     "every capitalised word would be [UNK]; drop --no-lower-case")


def check_output_dir(output_dir: str, overwrite: bool):
  if os.path.exists(output_dir) and not os.path.isdir(output_dir):
    raise BuildError(f"--output-dir: {output_dir} is a file, not a directory")
  if os.path.isdir(output_dir) and os.listdir(output_dir) and not overwrite:
    raise BuildError(f"--output-dir: {output_dir} is not empty; pass --overwrite to "
                     "replace its contents")
  parent = os.path.dirname(os.path.abspath(output_dir))
  try:
    os.makedirs(parent, exist_ok=True)
  except OSError as e:
    raise BuildError(f"--output-dir: cannot create {parent}: {e.strerror}") from None
  if not os.access(parent, os.W_OK):
    raise BuildError(f"--output-dir: cannot write in {parent}")


def build(config: BuildConfig) -> Stats:
  """Writes the TFRecords of `config`; returns the summed statistics."""
  if config.num_processes < 1:
    raise BuildError(f"--num-processes: {config.num_processes}; expected at least 1")
  if not 0 < config.mask_prob < 1:
    raise BuildError(f"--mask-prob: {config.mask_prob}; expected a value in (0, 1)")
  if config.num_out_files is not None and config.num_out_files < 1:
    raise BuildError(f"--num-out-files: {config.num_out_files}; expected at least 1 (or "
                     "leave it out for a file per 8 MB of text)")
  check_output_dir(config.output_dir, config.overwrite)
  vocab = load_vocab(config.vocab_file)
  check_vocab_case(vocab, config.do_lower_case)
  files = corpus_lib.list_files(config.corpus_dir)
  corpus_bytes = sum(os.path.getsize(path) for path in files)
  num_out_files = config.num_out_files or default_num_out_files(corpus_bytes,
                                                                config.num_processes)
  if num_out_files < config.num_processes:
    raise BuildError(f"--num-out-files: {num_out_files} is fewer than --num-processes "
                     f"{config.num_processes}; each process needs a file")
  parts = corpus_lib.split_work(files, config.num_processes)

  output_dir = os.path.abspath(config.output_dir)
  remove_stale_temp_dirs(output_dir)
  tmp_dir = f"{output_dir}{TEMP_INFIX}{os.getpid()}"
  try:
    os.makedirs(tmp_dir)  # beside the output dir: the final rename stays on one disk
    stats = _run_jobs(config, parts, num_out_files, tmp_dir, corpus_bytes)
    if stats.examples == 0:
      raise BuildError(f"--corpus-dir: {config.corpus_dir} holds no text (blank lines only)")
    _replace_dir(tmp_dir, output_dir, config.overwrite)
  except OSError as e:
    raise BuildError(f"writing {config.output_dir} failed: {cli.error_message(e)}; "
                     "nothing was written") from None
  except KeyboardInterrupt:
    raise cli.Interrupted(f"nothing was written; {config.output_dir} is as it "
                          "was") from None
  finally:
    shutil.rmtree(tmp_dir, ignore_errors=True)
  return stats


def remove_stale_temp_dirs(output_dir: str):
  """Deletes the temporary directories of builds whose process is gone (killed)."""
  parent, prefix = os.path.split(output_dir + TEMP_INFIX)
  for name in os.listdir(parent) if os.path.isdir(parent) else []:
    pid = name[len(prefix):]
    if name.startswith(prefix) and pid.isdigit() and not _is_running(int(pid)):
      shutil.rmtree(os.path.join(parent, name), ignore_errors=True)
      print(f"removed {os.path.join(parent, name)}, left by a build that was killed",
            flush=True)


def _is_running(pid: int) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:  # another user's process
    return True
  return True


def _replace_dir(new_dir: str, output_dir: str, overwrite: bool):
  """Moves the finished shards into place; the old ones go only once the new are in."""
  check_output_dir(output_dir, overwrite)  # again: something may have appeared meanwhile
  old_dir = None
  if os.path.isdir(output_dir):
    old_dir = f"{output_dir}.old-{os.getpid()}"
    os.rename(output_dir, old_dir)
  os.rename(new_dir, output_dir)
  if old_dir:
    shutil.rmtree(old_dir)


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
    # Spawned (not forked) workers: TensorFlow does not survive a fork.
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
  # One thread each: the processes are the parallelism.
  tf.config.threading.set_inter_op_parallelism_threads(1)
  tf.config.threading.set_intra_op_parallelism_threads(1)


def _write_part_in_worker(config, job, spans, num_out_files, tmp_dir):
  return write_part(config, job, spans, num_out_files, tmp_dir,
                    report=lambda *args: _worker_queue.put(args))


def write_part(config: BuildConfig, job: int, spans: List[corpus_lib.Span],
               num_out_files: int, out_dir: str, report=None) -> Stats:
  """One process's work: its spans of the corpus into its shards of `out_dir`."""
  try:
    return _write_part(config, job, spans, num_out_files, out_dir, report)
  except (OSError, tf.errors.OpError) as e:  # e.g. a full disk
    raise BuildError(f"writing {config.output_dir} failed: {cli.error_message(e)}; "
                     "nothing was written") from None


def _write_part(config, job, spans, num_out_files, out_dir, report) -> Stats:
  from data_prep.tokenizer import Tokenizer

  vocab = load_vocab(config.vocab_file)
  tokenizer = Tokenizer(vocab, config.do_lower_case, config.strip_accents)
  builder = examples_lib.ExampleBuilder(config.max_seq_length, vocab.cls_id, vocab.sep_id,
                                        random.Random(config.seed * 1_000_003 + job))
  writer = ShardWriter(out_dir, job, config, num_out_files, vocab)
  stats = Stats()
  add_line, end_document = builder.add_line, builder.end_document
  start, start_cpu = time.time(), time.process_time()
  last_report = start
  with writer:
    for batch, file_bytes in _line_batches(spans, config.blanks_separate_docs, stats):
      ids, offsets = _tokenize_batch(tokenizer, [line for line in batch if line is not None],
                                     stats)
      row = 0
      for line in batch:  # the hot loop: a few hundred thousand lines per second
        if line is None:  # a document boundary
          example = end_document()
        else:
          example = add_line(ids[offsets[row]:offsets[row + 1]])
          row += 1
        if example is not None:
          writer.add(example, stats)
      stats.file_bytes += file_bytes
      if report and time.time() - last_report > 1:
        last_report = time.time()
        report(job, stats.file_bytes, stats.tokens)
  stats.single_segment = builder.single_segment
  stats.short_target = builder.short_target
  stats.loop_seconds = time.time() - start
  stats.loop_cpu_seconds = time.process_time() - start_cpu
  if report:
    report(job, stats.file_bytes, stats.tokens)
  return stats


def _tokenize_batch(tokenizer, texts: List[str], stats: Stats):
  """Ids (a flat list) and offsets of `texts`; a giant line goes piece by piece."""
  giant = {i: text for i, text in enumerate(texts) if len(text) > GIANT_LINE_CHARS}
  if giant:
    texts = ["" if i in giant else text for i, text in enumerate(texts)]
  ids, offsets = tokenizer.batch_ids(texts)
  stats.tokens += len(ids)
  stats.unk_tokens += int(np.count_nonzero(ids == tokenizer.vocab.unk_id))
  ids, offsets = _clip_lines(ids, offsets, stats)
  ids, offsets = ids.tolist(), offsets.tolist()  # list slices are cheaper per line
  for i in sorted(giant, reverse=True):  # from the end: earlier offsets stay valid
    line_ids = _giant_line_ids(tokenizer, giant[i], stats)
    ids[offsets[i]:offsets[i]] = line_ids
    offsets[i + 1:] = [offset + len(line_ids) for offset in offsets[i + 1:]]
  return ids, offsets


def _giant_line_ids(tokenizer, text: str, stats: Stats) -> List[int]:
  """The first UNBOUNDED ids of a very long line, tokenized a piece at a time.

  Pieces end just after a space, which always ends a word in BERT's rules, so they give
  the same tokens as the whole line; memory stays that of one piece, not of the line.
  """
  kept, start = [], 0
  while start < len(text):
    end = start + GIANT_LINE_CHARS
    if end < len(text):
      cut = text.rfind(" ", start, end)
      end = cut + 1 if cut > start else (text.find(" ", end) + 1 or len(text))
    ids, _ = tokenizer.batch_ids([text[start:end]])
    stats.tokens += len(ids)
    stats.unk_tokens += int(np.count_nonzero(ids == tokenizer.vocab.unk_id))
    room = examples_lib.UNBOUNDED - len(kept)
    kept.extend(ids[:room].tolist())
    stats.dropped_tokens += max(0, len(ids) - room)
    start = end
  return kept


def _clip_lines(ids: np.ndarray, offsets: np.ndarray, stats: Stats):
  """Cuts lines to UNBOUNDED tokens: what lies beyond can never reach an example.

  Packing compares lengths with targets of at most UNBOUNDED, so its choices (and its
  random draws) are the same as with the whole line; a 50 MB line stays cheap.
  """
  lengths = np.diff(offsets)
  if lengths.size == 0 or lengths.max() <= examples_lib.UNBOUNDED:
    return ids, offsets
  position = np.arange(len(ids)) - np.repeat(offsets[:-1], lengths)
  kept = np.minimum(lengths, examples_lib.UNBOUNDED)
  stats.dropped_tokens += int(lengths.sum() - kept.sum())
  return ids[position < examples_lib.UNBOUNDED], np.concatenate([[0], np.cumsum(kept)])


def _line_batches(spans, blanks_separate_docs: bool, stats: Stats):
  """Batches of stripped lines (None where a document ends), one per block of text.

  As in the original, a line is stripped of surrounding whitespace; a blank line ends
  the document (unless blanks do not separate documents), and so does a file's end.
  Repeated ends are harmless: an end with nothing pending builds nothing.
  """
  for span in spans:
    previous, has_text = None, False  # None: a blank line, or the start of the span
    for block, file_bytes in corpus_lib.read_blocks(span):
      text, invalid = corpus_lib.decode(block)
      stats.invalid_bytes += invalid
      lines = text.split("\n")
      if text.endswith("\n"):
        lines.pop()
      batch = [line.strip() or None for line in lines]
      stats.lines += len(batch) - batch.count(None)
      if blanks_separate_docs:
        stats.documents += sum(1 for before, line in zip([previous] + batch, batch)
                               if before is None and line is not None)
        previous = batch[-1] if batch else previous
      else:
        batch = [line for line in batch if line is not None]
        stats.documents += bool(batch) and not has_text
        has_text = has_text or bool(batch)
      yield batch, file_bytes
    yield [None], 0


class ShardWriter:
  """This process's shards, filled round-robin; static masking in batches if asked."""

  def __init__(self, out_dir: str, job: int, config: BuildConfig, num_out_files: int,
               vocab: Vocab):
    self.config, self.vocab = config, vocab
    self.paths = [os.path.join(out_dir, FILE_PATTERN.format(index=i, count=num_out_files))
                  for i in range(num_out_files) if i % config.num_processes == job]
    self.writers = []
    self.pending: List[examples_lib.Example] = []
    self.written = 0
    self.seed = config.seed
    self.job = job
    self.mask_batches = 0

  def __enter__(self):
    self.writers = [tf.io.TFRecordWriter(path) for path in self.paths]
    return self

  def __exit__(self, exc_type, *_):
    if exc_type is None:
      self._flush()
    for writer in self.writers:
      writer.close()

  def add(self, example: examples_lib.Example, stats: Stats):
    stats.examples += 1
    stats.dropped_tokens += example.num_dropped
    stats.real_positions += example.num_real
    stats.positions += len(example.input_ids)
    self.pending.append(example)
    if len(self.pending) >= MASK_BATCH:
      self._flush()

  def _flush(self):
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
    for record in serialize_examples(features):
      self.writers[self.written % len(self.writers)].write(record)
      self.written += 1
    self.pending = []

  def _mask(self, input_ids, input_mask) -> Dict[str, np.ndarray]:
    """BERT-style pre-masked features, drawn by pretrain.masking (one set of rules)."""
    from pretrain import masking
    v = self.vocab
    masked = masking.mask_inputs(
        input_ids, input_mask, mask_prob=self.config.mask_prob,
        max_predictions=masking.max_predictions_per_seq(self.config.mask_prob,
                                                        self.config.max_seq_length),
        mask_id=v.mask_id, special_ids=[v.cls_id, v.sep_id, v.mask_id],
        seed=tf.constant([self.seed, (self.job << 32) + self.mask_batches], tf.int64))
    self.mask_batches += 1
    return {"input_ids": masked.input_ids.numpy(),
            "masked_lm_positions": masked.masked_lm_positions.numpy(),
            "masked_lm_ids": masked.masked_lm_ids.numpy(),
            "masked_lm_weights": masked.masked_lm_weights.numpy()}


def _varint(n: int) -> bytes:
  out = bytearray()
  while n >= 0x80:
    out.append((n & 0x7F) | 0x80)
    n >>= 7
  out.append(n)
  return bytes(out)


_SMALL_VARINTS = [_varint(n) for n in range(1 << 14)]
_MAX_VALUE = 1 << 28  # token ids and positions: four varint bytes at most


def _packed_varints(values: np.ndarray) -> List[bytes]:
  """Each row of ints in [0, 2^28) [B, L] as protobuf varints, all rows at once."""
  low, high = (values.min(), values.max()) if values.size else (0, 0)
  if low < 0 or high >= _MAX_VALUE:
    raise ValueError(f"feature values must lie in [0, {_MAX_VALUE}) to be written")
  if high < 0x80:  # one byte each: masks, segment ids, positions
    return [row.tobytes() for row in values.astype(np.uint8)]
  values = values.astype(np.uint32)
  num_bytes = (1 + (values >= 1 << 7) + (values >= 1 << 14) + (values >= 1 << 21))
  groups = np.stack([((values >> 7 * k) & 0x7F) | ((num_bytes > k + 1) << 7)
                     for k in range(4)], -1).astype(np.uint8)
  data = groups[np.arange(4) < num_bytes[..., None]].tobytes()
  ends = np.cumsum(num_bytes.sum(-1)).tolist()
  return [data[start:end] for start, end in zip([0] + ends[:-1], ends)]


def _field(number: int, payload: bytes) -> bytes:
  """A length-delimited protobuf field."""
  n = len(payload)
  return (_SMALL_VARINTS[number << 3 | 2] + (_SMALL_VARINTS[n] if n < 1 << 14 else _varint(n))
          + payload)


def serialize_examples(features: Dict[str, np.ndarray]) -> List[bytes]:
  """tf.train.Example bytes for each row of [B, L] arrays, encoded here in bulk.

  Building protobuf objects one by one took a quarter of the build time. The wire
  format: Example.features(1) -> Features.feature(1, map entries: key 1, value 2) ->
  Feature.int64_list(3) or float_list(2) -> packed value(1).
  """
  encoded = []
  for name, values in features.items():
    key = _field(1, name.encode("utf-8"))
    if values.dtype.kind == "f":
      rows = [row.tobytes() for row in values.astype("<f4")]
      kind = 2
    else:
      rows = _packed_varints(values)
      kind = 3
    # Masks and segment ids take few distinct rows: their entries come from a cache.
    cached = kind == 3 and values.max(initial=0) < 0x80
    cache = _entry_cache.setdefault(name, {}) if cached else {}
    if len(cache) > 20_000:
      cache.clear()
    entries = []
    for row in rows:
      entry = cache.get(row)
      if entry is None:
        entry = _field(1, key + _field(2, _field(kind, _field(1, row))))
        if cached:
          cache[row] = entry
      entries.append(entry)
    encoded.append(entries)
  return [_field(1, b"".join(entries)) for entries in zip(*encoded)]


_entry_cache: Dict[str, Dict[bytes, bytes]] = {}


def print_summary(stats: Stats, output_dir: str, stream=None):
  stream = stream or sys.stdout
  files = sorted(os.listdir(output_dir))
  size = sum(os.path.getsize(os.path.join(output_dir, name)) for name in files)
  rows = [
      ("documents", f"{stats.documents:,}"),
      ("lines", f"{stats.lines:,}"),
      ("tokens", f"{stats.tokens:,} ({stats.dropped_tokens:,} cut by max length)"),
      ("examples", f"{stats.examples:,} ({_pct(stats.single_segment, stats.examples)} "
                   f"single-segment, {_pct(stats.short_target, stats.examples)} "
                   "short target)"),
      ("[UNK] rate", _pct(stats.unk_tokens, stats.tokens)),
      ("padding rate", _pct(stats.positions - stats.real_positions, stats.positions)),
      ("invalid UTF-8 bytes replaced", f"{stats.invalid_bytes:,}"),
      ("files", f"{len(files)} in {output_dir}"),
      ("bytes", f"{size:,}"),
  ]
  width = max(len(name) for name, _ in rows)
  for name, value in rows:
    print(f"{name:<{width}}  {value}", file=stream)


def _pct(part: int, whole: int) -> str:
  return f"{100.0 * part / whole:.2f}%" if whole else "n/a"
