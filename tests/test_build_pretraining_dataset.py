"""build_pretraining_dataset: packing rules, determinism, the feature spec, bad input."""

import bz2
import collections
import dataclasses
import glob
import gzip
import json
import lzma
import os
import random
import resource
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf
from scipy import stats as scipy_stats

from data_prep import build as build_lib
from data_prep import build_config
from data_prep import lines as lines_lib
from data_prep import corpus as corpus_lib
from data_prep import examples as examples_lib
from data_prep import prepare as prepare_lib
from data_prep.records import feature_spec
from tests import reference_tokenizer as ref
from data_prep import tokenizer as tokenizer_lib
from data_prep.tokenizer import Tokenizer
from data_prep.vocab import VocabError, load_vocab
from data_prep import records
from tests.helpers import ROOT, shared_path

import build_pretraining_dataset

L = 128


@pytest.fixture(scope="module")
def vocab_file():
  return shared_path("vocab", "bert_uncased_vocab.txt")


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory, vocab_file):
  """The first 3000 lines of the shared corpus, in two files."""
  folder = tmp_path_factory.mktemp("small_corpus")
  with open(shared_path("corpus", "english_corpus.txt"), encoding="utf-8") as f:
    lines = [next(f) for _ in range(3000)]
  (folder / "a.txt").write_text("".join(lines[:1800]), encoding="utf-8")
  (folder / "b.txt").write_text("".join(lines[1800:]), encoding="utf-8")
  return str(folder)


def config(corpus_dir, vocab_file, output_dir, **kwargs):
  return build_config.BuildConfig(corpus_dir=str(corpus_dir), vocab_file=vocab_file,
                               output_dir=str(output_dir), progress=False, **kwargs)


def read_records(output_dir, max_predictions=None):
  files = sorted(glob.glob(os.path.join(output_dir, "pretrain_data.tfrecord-*")))
  spec = feature_spec(L, max_predictions)
  data = tf.data.TFRecordDataset(files).map(lambda r: tf.io.parse_single_example(r, spec))
  batches = list(data.batch(8192).as_numpy_iterator())
  return {name: np.concatenate([b[name] for b in batches]) for name in spec}


def file_bytes(output_dir):
  """The shards' bytes (the build's tokenizer_config.json aside: test_languages.py)."""
  return {name: open(os.path.join(output_dir, name), "rb").read()
          for name in sorted(os.listdir(output_dir)) if name != "tokenizer_config.json"}


@pytest.fixture(scope="module")
def shared_build(tmp_path_factory, vocab_file):
  corpus_dir = tmp_path_factory.mktemp("corpus")
  os.symlink(shared_path("corpus", "english_corpus.txt"), corpus_dir / "english_corpus.txt")
  out = tmp_path_factory.mktemp("shared") / "records"
  stats = build_lib.build(config(corpus_dir, vocab_file, out, seed=7))
  return stats, str(out), read_records(str(out))


def test_examples_place_cls_sep_and_segments_as_the_original(shared_build, vocab_file):
  stats, _, records = shared_build
  vocab = load_vocab(vocab_file)
  ids, mask, segments = records["input_ids"], records["input_mask"], records["segment_ids"]
  assert len(ids) == stats.examples > 30000
  num_real = mask.sum(1)
  assert np.array_equal(mask, (np.arange(L)[None] < num_real[:, None]).astype(mask.dtype))
  assert np.all(ids[mask == 0] == 0) and np.all(segments[mask == 0] == 0)
  assert np.all(ids[:, 0] == vocab.cls_id) and np.all((ids == vocab.cls_id).sum(1) == 1)
  rows = np.arange(len(ids))
  assert np.all(ids[rows, num_real - 1] == vocab.sep_id)
  has_b = segments.max(1) == 1
  a_len = np.where(has_b, np.argmax(segments, 1), num_real)  # [CLS] A [SEP]
  assert np.all(ids[rows, a_len - 1] == vocab.sep_id)
  assert np.all((ids == vocab.sep_id).sum(1) == 1 + has_b)
  # Segment ids: 0 over [CLS] A [SEP], then 1 up to the last real token.
  expected = ((np.arange(L)[None] >= a_len[:, None]) & (mask == 1)).astype(segments.dtype)
  assert np.array_equal(segments, expected)
  assert np.all(a_len >= 3) and np.all(num_real <= L)
  assert np.all(num_real - a_len != 1)  # never an empty B followed by [SEP]


def test_every_input_token_is_accounted_for(shared_build, vocab_file):
  stats, _, records = shared_build
  vocab = load_vocab(vocab_file)
  with open(shared_path("corpus", "english_corpus.txt"), encoding="utf-8") as f:
    lines = [line.strip() for line in f]
  corpus_ids, _ = Tokenizer(vocab).batch_ids(lines)
  ids = records["input_ids"][records["input_mask"] == 1]
  content = ids[(ids != vocab.cls_id) & (ids != vocab.sep_id)]
  assert stats.tokens == len(corpus_ids)
  assert len(content) + stats.dropped_tokens == len(corpus_ids)
  # Only truncation removes tokens, and nothing is invented.
  in_examples = np.bincount(content, minlength=len(vocab))
  in_corpus = np.bincount(corpus_ids, minlength=len(vocab))
  assert np.all(in_examples <= in_corpus)
  assert stats.documents == 6788 and stats.lines == sum(1 for line in lines if line)


def test_corpus_rates_match_the_draws(shared_build):
  stats, _, records = shared_build
  # Short documents add single-segment examples beyond the 10% draw; short targets are
  # counted where drawn.
  assert 0.10 <= stats.single_segment / stats.examples <= 0.30
  assert abs(stats.short_target / stats.examples - 0.05) < 4 * np.sqrt(
      0.05 * 0.95 / stats.examples)
  assert stats.single_segment == int((records["segment_ids"].max(1) == 0).sum())


def test_packing_draws_ten_percent_single_segment_and_five_percent_short_targets():
  # One endless document of one-token lines: a single segment happens exactly when the
  # unbounded first target is drawn, and a content length of at most 100 exactly when a
  # short target t <= 100 is drawn (t uniform in [5, 128]).
  builder = examples_lib.ExampleBuilder(L, 101, 102, random.Random(3))
  built = []
  while len(built) < 6000:
    example = builder.add_line([1000 + len(built) % 50])
    if example:
      built.append(example)
  n = len(built)
  single = np.mean([e.num_real == e.a_end for e in built])
  content = np.array([e.num_real - 2 - (e.num_real > e.a_end) for e in built])
  assert abs(single - 0.1) < 4 * np.sqrt(0.1 * 0.9 / n)
  p_short = 0.05 * 96 / 124
  assert abs(np.mean(content <= 100) - p_short) < 4 * np.sqrt(p_short * (1 - p_short) / n)
  short = content[content <= 100]
  assert scipy_stats.kstest(short, scipy_stats.randint(5, 101).cdf).pvalue > 1e-3


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path, small_corpus, vocab_file):
  for name, seed in (("a", 1), ("b", 1), ("c", 2)):
    build_lib.build(config(small_corpus, vocab_file, tmp_path / name, seed=seed,
                           num_out_files=3))
  a, b, c = (file_bytes(tmp_path / name) for name in "abc")
  assert a == b and list(a) == list(c) and a != c
  assert list(a) == [f"pretrain_data.tfrecord-{i}-of-3" for i in range(3)]


def test_two_processes_do_not_depend_on_scheduling(tmp_path, small_corpus, vocab_file):
  cfg = config(small_corpus, vocab_file, tmp_path / "spawned", seed=5, num_processes=2)
  stats = build_lib.build(cfg)  # two spawned worker processes
  # The same parts written one after the other in this process: the same bytes.
  files = corpus_lib.list_files(small_corpus)
  serial = tmp_path / "serial"
  serial.mkdir()
  total = build_config.Stats()
  for job, spans in reversed(list(enumerate(corpus_lib.split_work(files, 2)))):
    total.add(build_lib.write_part(build_lib.with_normalization(cfg), job, spans, 2,
                                   str(serial)))
  assert file_bytes(tmp_path / "spawned") == file_bytes(serial)
  untimed = lambda s: dataclasses.replace(s, loop_seconds=0, loop_cpu_seconds=0)
  assert untimed(stats) == untimed(total)
  single = build_lib.build(config(small_corpus, vocab_file, tmp_path / "one", seed=5))
  assert (single.tokens, single.lines) == (stats.tokens, stats.lines)


def test_record_files_equal_tensorflows(tmp_path):
  # The writer's framing and checksums: byte for byte what tf.io.TFRecordWriter writes
  # for the same records (empty, short, and longer than a varint byte of length).
  payloads = [b"", b"x", bytes(range(256)) * 3, os.urandom(70_000)]
  ours, theirs = str(tmp_path / "ours.tfrecord"), str(tmp_path / "tf.tfrecord")
  with open(ours, "wb") as record_file:
    for payload in payloads:
      record_file.write(records.frame(payload))
  with tf.io.TFRecordWriter(theirs) as writer:
    for payload in payloads:
      writer.write(payload)
  assert open(ours, "rb").read() == open(theirs, "rb").read()


# Put on PYTHONPATH, it makes TensorFlow unimportable in every process that starts
# (spawned workers included): an import anywhere fails the build.
NO_TENSORFLOW = """
import os, sys
class NoTensorFlow:
  def find_spec(self, name, path=None, target=None):
    if name.split(".")[0] in ("tensorflow", "tensorflow_text"):
      raise ImportError(f"process {os.getpid()} imported {name}")
sys.meta_path.insert(0, NoTensorFlow())
"""


class ReferenceBatches:
  """data_prep.tokenizer.Tokenizer's interface over the plain-Python reference."""

  def __init__(self, vocab, lower_case=True, accents=True):
    self.vocab = vocab
    self._reference = ref.ReferenceTokenizer(vocab.ids, lower_case, accents)

  def batch_ids(self, lines):
    rows = [self._reference.ids(line) for line in lines]
    return (np.array([i for row in rows for i in row], np.int32),
            np.cumsum([0] + [len(row) for row in rows]))


def test_default_build_imports_no_tensorflow_and_writes_berts_tokens(
    tmp_path, vocab_file, monkeypatch):
  corpus = tmp_path / "corpus"
  corpus.mkdir()
  with open(shared_path("corpus", "english_corpus.txt"), encoding="utf-8") as f:
    lines = [next(f) for _ in range(400)]
  (corpus / "a.txt").write_text("".join(lines) + "Ünïcödé 北京 \u2028 x\u166dy ⹃ «q»\n",
                                encoding="utf-8")
  (tmp_path / "no_tf").mkdir()
  (tmp_path / "no_tf" / "sitecustomize.py").write_text(NO_TENSORFLOW)
  env = dict(os.environ, PYTHONPATH=str(tmp_path / "no_tf"))
  run = lambda *argv: subprocess.run([sys.executable, *argv], env=env,
                                     capture_output=True, text=True, check=False)
  blocked = run("-c", "import tensorflow")
  assert blocked.returncode != 0 and "imported tensorflow" in blocked.stderr
  for processes in (1, 2):
    built = run(os.path.join(ROOT, "build_pretraining_dataset.py"), "--corpus-dir", str(corpus),
                "--vocab-file", vocab_file, "--output-dir", str(tmp_path / f"out{processes}"),
                "--num-processes", str(processes), "--num-out-files", "2",
                "--no-progress")
    assert built.returncode == 0, built.stderr
  # The same bytes as a build whose tokenizer is BERT's rules in plain Python.
  monkeypatch.setattr(tokenizer_lib, "Tokenizer", ReferenceBatches)
  cfg = build_lib.with_normalization(config(corpus, vocab_file, tmp_path / "reference",
                                            num_processes=2))
  (tmp_path / "reference").mkdir()
  parts = corpus_lib.split_work(corpus_lib.list_files(str(corpus)), 2)
  for job, spans in enumerate(parts):  # in this process, where the patch holds
    build_lib.write_part(cfg, job, spans, 2, str(tmp_path / "reference"))
  files = file_bytes(tmp_path / "reference")
  assert len(files) == 2 and file_bytes(tmp_path / "out2") == files


def test_bounded_word_cache_gives_the_same_ids(vocab_file, monkeypatch):
  vocab = load_vocab(vocab_file)
  with open(shared_path("corpus", "english_corpus.txt"), encoding="utf-8") as f:
    lines = [next(f).rstrip("\n") for _ in range(600)]
  lines += ["Ünïcödé wörds «quoted» 北京", "x" * 250 + " tail", "", "naïve café"]
  batches = [lines[i:i + 50] for i in range(0, len(lines), 50)] * 2
  unbounded = Tokenizer(vocab)
  want = [unbounded.batch_ids(batch) for batch in batches]
  monkeypatch.setattr(tokenizer_lib, "CACHED_WORDS", 20)
  bounded = Tokenizer(vocab)
  most_cached = 0
  for batch, (want_ids, want_offsets) in zip(batches, want):
    ids, offsets = bounded.batch_ids(batch)
    assert ids.tolist() == want_ids.tolist() and offsets.tolist() == want_offsets.tolist()
    most_cached = max(most_cached, len(bounded._words))  # pylint: disable=protected-access
  # It did start afresh: at most 20 words kept plus one batch's new words.
  assert len(unbounded._words) > 2000 > most_cached  # pylint: disable=protected-access


def test_split_work_cuts_at_line_starts_and_covers_everything(small_corpus):
  files = corpus_lib.list_files(small_corpus)
  for parts in (1, 2, 3, 7):
    lines = [raw for spans in corpus_lib.split_work(files, parts) for span in spans
             for block, _ in corpus_lib.read_blocks(span)
             for raw in block.split(b"\n")[:-1]]
    whole = [raw for path in files for raw in open(path, "rb").read().split(b"\n")[:-1]]
    assert lines == whole


def test_static_masking_follows_the_masking_rules(tmp_path, small_corpus, vocab_file):
  vocab = load_vocab(vocab_file)
  build_lib.build(config(small_corpus, vocab_file, tmp_path / "plain", seed=3))
  build_lib.build(config(small_corpus, vocab_file, tmp_path / "masked", seed=3,
                         static_masking=True))
  n_pred = records.max_predictions_per_seq(0.15, L)
  plain = read_records(str(tmp_path / "plain"))
  masked = read_records(str(tmp_path / "masked"), n_pred)
  assert np.array_equal(plain["input_mask"], masked["input_mask"])
  original, rows = plain["input_ids"], np.arange(len(plain["input_ids"]))[:, None]
  positions, weights = masked["masked_lm_positions"], masked["masked_lm_weights"]
  num_tokens = plain["input_mask"].sum(1)
  expected_count = np.maximum(1, np.minimum(n_pred, np.round(num_tokens * 0.15)))
  assert np.array_equal(weights.sum(1), expected_count)
  chosen = weights > 0
  assert np.array_equal(masked["masked_lm_ids"][chosen], original[rows, positions][chosen])
  assert not np.isin(original[rows, positions][chosen],
                     [vocab.cls_id, vocab.sep_id, vocab.mask_id]).any()
  at_chosen = masked["input_ids"][rows, positions][chosen]
  assert np.all((at_chosen == vocab.mask_id) | (at_chosen == original[rows, positions][chosen]))
  share_masked = np.mean(at_chosen == vocab.mask_id)
  assert 0.8 < share_masked < 0.9
  untouched = np.ones_like(original, bool)
  untouched[np.repeat(rows, n_pred, 1)[chosen], positions[chosen]] = False
  assert np.array_equal(masked["input_ids"][untouched], original[untouched])


def test_invalid_utf8_is_replaced_and_counted(tmp_path, vocab_file):
  corpus = tmp_path / "corpus"
  corpus.mkdir()
  (corpus / "a.txt").write_bytes(b"Good text here.\nBad \xff\xfe bytes \xc3 here.\n\nMore.\n")
  (corpus / "empty.txt").write_bytes(b"")
  stats = build_lib.build(config(corpus, vocab_file, tmp_path / "out"))
  assert stats.invalid_bytes == 3 and stats.documents == 2 and stats.examples == 2


def test_a_single_50mb_line(tmp_path, vocab_file):
  corpus = tmp_path / "corpus"
  corpus.mkdir()
  line = b"the quick brown fox jumps over the lazy dog " * (50_000_000 // 44)
  (corpus / "big.txt").write_bytes(b"First document.\n\n" + line + b"\n")
  stats = build_lib.build(config(corpus, vocab_file, tmp_path / "out"))
  records = read_records(str(tmp_path / "out"))
  assert stats.examples == 2 and stats.tokens == 3 + 9 * (50_000_000 // 44)
  assert records["input_mask"][1].sum() == L  # the long line: one full example
  # Both examples hold one segment: [CLS] and [SEP] around the content.
  assert stats.tokens - stats.dropped_tokens == records["input_mask"].sum() - 2 * 2
  sentence = Tokenizer(load_vocab(vocab_file)).ids("the quick brown fox jumps over the lazy dog")
  assert records["input_ids"][1][1:L - 1].tolist() == (sentence * 20)[:L - 2]


def test_a_line_far_longer_than_an_example_is_warned_of_once(tmp_path, small_corpus,
                                                            vocab_file, capsys):
  with open(os.path.join(small_corpus, "a.txt"), encoding="utf-8") as f:
    lines = f.read().splitlines()
  long_line = "the quick brown fox jumps over the lazy dog " * 300  # 2,700 word-pieces
  # Past the middle of the file: the second process's span starts inside it, so the
  # line number counts the lines before that span.
  at = len(lines) * 3 // 4
  lines[at:at] = [long_line, long_line + " again"]
  corpus = tmp_path / "corpus"
  corpus.mkdir()
  (corpus / "a.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
  second = corpus_lib.split_work([str(corpus / "a.txt")], 2)[1][0]
  assert 0 < second.start < len("\n".join(lines[:at]).encode("utf-8"))
  assert build_pretraining_dataset.main([
      "--corpus-dir", str(corpus), "--vocab-file", vocab_file, "--output-dir",
      str(tmp_path / "out"), "--num-processes", "2", "--no-progress"]) == 0
  assert capsys.readouterr().err == (
      f"warning: {corpus / 'a.txt'}:{at + 1}: a line of 2,700 word-pieces; as in the "
      "original, it goes into one example of at most 126, so at least 95.33% of it is "
      "dropped (1 more line(s) of over 10x --max-seq-length); put one sentence or "
      "paragraph per line\n")


def test_giant_lines_tokenized_in_pieces_give_the_same_ids(vocab_file, monkeypatch):
  tokenizer = Tokenizer(load_vocab(vocab_file))
  texts = ["short line", "Ünïcode wörds, and   more words " * 9, "x" * 120 + " tail",
           "no-spaces-" * 20, "", "ends with a space " * 7 + " "]
  ids, offsets = tokenizer.batch_ids(texts)
  monkeypatch.setattr(lines_lib, "GIANT_LINE_CHARS", 40)
  stats = build_config.Stats()
  got_ids, got_offsets, lengths = lines_lib.tokenize_batch(tokenizer, texts, stats)
  assert got_ids == ids.tolist() and got_offsets == offsets.tolist()
  assert stats.tokens == len(ids) and stats.dropped_tokens == 0
  assert lengths.tolist() == np.diff(offsets).tolist()


@pytest.mark.parametrize("setup, message", [
    ("missing_corpus", "does not exist"),
    ("corpus_is_file", "not a directory"),
    ("empty_files", "every file .* is empty"),
    ("blank_lines_only", "holds no text"),
    ("output_is_file", "is a file"),
    ("output_not_empty", "not empty; pass --overwrite"),
    ("unwritable", "cannot create"),
    ("cased_vocab", "cased vocabulary"),
    ("too_few_files", "fewer than --num-processes"),
    ("zero_files", "--num-out-files 0: expected an integer >= 1 or null"),
    ("zero_processes", "--num-processes 0: expected an integer >= 1"),
    ("mask_prob_one", r"--mask-prob 1.0: expected a number in \(0, 1\)"),
])
def test_bad_input_fails_clearly_and_writes_nothing(tmp_path, small_corpus, vocab_file,
                                                    setup, message):
  corpus, out, vocab = small_corpus, tmp_path / "out", vocab_file
  kwargs = {}
  if setup == "missing_corpus":
    corpus = tmp_path / "nowhere"
  elif setup == "corpus_is_file":
    corpus = tmp_path / "file.txt"
    corpus.write_text("text\n")
  elif setup in ("empty_files", "blank_lines_only"):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("" if setup == "empty_files" else "\n \n\t\n")
  elif setup == "output_is_file":
    out.write_text("x")
  elif setup == "output_not_empty":
    out.mkdir()
    (out / "old.tfrecord").write_text("x")
  elif setup == "unwritable":
    out = "/proc/no_such_dir/out"
  elif setup == "cased_vocab":
    vocab = tmp_path / "cased.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
                               + [f"Word{i}" for i in range(50)]) + "\n")
    vocab = str(vocab)
    kwargs = {"do_lower_case": True}  # without it, the build reads it as cased
  elif setup == "too_few_files":
    kwargs = {"num_processes": 2, "num_out_files": 1}
  elif setup == "zero_files":  # not taken for "the default"
    kwargs = {"num_out_files": 0}
  elif setup == "zero_processes":
    kwargs = {"num_processes": 0}
  elif setup == "mask_prob_one":
    kwargs = {"mask_prob": 1.0, "static_masking": True}
  before = sorted(os.listdir(tmp_path))
  with pytest.raises(ValueError, match=message):
    build_lib.build(config(corpus, vocab, out, **kwargs))
  assert sorted(os.listdir(tmp_path)) == before  # no temp dirs, no partial output


def test_uncased_vocab_without_lower_casing_is_refused(tmp_path, small_corpus, vocab_file):
  with pytest.raises(VocabError, match="uncased vocabulary"):
    build_lib.build(config(small_corpus, vocab_file, tmp_path / "o", do_lower_case=False))


def test_overwrite_replaces_everything(tmp_path, small_corpus, vocab_file):
  out = tmp_path / "out"
  out.mkdir()
  (out / "pretrain_data.tfrecord-0-of-9").write_text("stale")
  build_lib.build(config(small_corpus, vocab_file, out, overwrite=True, num_out_files=2))
  assert sorted(os.listdir(out)) == ["pretrain_data.tfrecord-0-of-2",
                                     "pretrain_data.tfrecord-1-of-2",
                                     "tokenizer_config.json"]
  assert sorted(os.listdir(tmp_path)) == ["out"]


def test_overwrite_refuses_to_delete_a_users_files(tmp_path, small_corpus, vocab_file,
                                                   capsys):
  out = tmp_path / "out"
  (out / "sub").mkdir(parents=True)
  (out / "pretrain_data.tfrecord-0-of-1").write_text("stale")
  (out / "notes.txt").write_text("mine")
  (out / "sub" / "keep.txt").write_text("mine too")
  status = build_pretraining_dataset.main([
      "--corpus-dir", small_corpus, "--vocab-file", vocab_file, "--output-dir", str(out),
      "--overwrite", "--no-progress"])
  assert (status, capsys.readouterr().err) == (2, (
      f"error: --output-dir: {out} also holds what a build does not write (notes.txt, "
      "sub/); --overwrite replaces a build's shards only: move those elsewhere, or "
      "choose another --output-dir\n"))
  assert (out / "notes.txt").read_text() == "mine"
  assert (out / "sub" / "keep.txt").read_text() == "mine too"
  assert (out / "pretrain_data.tfrecord-0-of-1").read_text() == "stale"
  assert sorted(os.listdir(tmp_path)) == ["out"]


def test_a_full_disk_leaves_nothing_half_written(tmp_path, small_corpus, vocab_file):
  # A file-size limit makes writes fail the way a full disk does (EFBIG vs ENOSPC).
  old_limit = resource.getrlimit(resource.RLIMIT_FSIZE)
  old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
  resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, old_limit[1]))
  try:
    with pytest.raises(build_lib.BuildError, match="nothing was written"):
      build_lib.build(config(small_corpus, vocab_file, tmp_path / "out", num_out_files=1))
  finally:
    resource.setrlimit(resource.RLIMIT_FSIZE, old_limit)
    signal.signal(signal.SIGXFSZ, old_handler)
  assert os.listdir(tmp_path) == []


@pytest.mark.slow
def test_default_run_harvests_english_learns_a_vocab_and_builds(tmp_path, monkeypatch):
  monkeypatch.setattr(prepare_lib, "DEFAULT_CORPUS_BYTES", 400_000)
  stats = prepare_lib.prepare(build_config.BuildConfig(progress=False),
                              str(tmp_path / "data"), 4000, log=lambda *_: None)
  data = tmp_path / "data"
  assert sorted(os.listdir(data)) == ["corpus", "pretrain_tfrecords",
                                      "tokenizer_config.json", "vocab.txt"]
  text = (data / "corpus" / "python_docs.txt").read_text(encoding="utf-8")
  lines = [line for line in text.split("\n") if line]
  assert len(text.encode("utf-8")) >= 400_000 and len(lines) > 2000
  assert not any(line.lstrip().startswith((">>>", "def ", "import ")) for line in lines)
  words = collections.Counter(w.lower() for line in lines for w in line.split())
  assert {"the", "of", "a", "is", "to"} <= {w for w, _ in words.most_common(20)}
  vocab = load_vocab(str(data / "vocab.txt"))
  assert len(vocab) <= 4000 and vocab.cls_id == 101
  assert stats.unk_tokens / stats.tokens < 0.001 and stats.examples > 500
  assert len(read_records(str(data / "pretrain_tfrecords"))["input_ids"]) == stats.examples


def test_script_prints_one_line_errors(tmp_path, capsys):
  status = build_pretraining_dataset.main([
      "--corpus-dir", str(tmp_path / "x"), "--vocab-file", str(tmp_path),
      "--output-dir", str(tmp_path / "out")])
  err = capsys.readouterr().err
  assert status == 2 and err.count("\n") == 1
  assert err.startswith(f"error: {tmp_path}: is a directory; expected a BERT vocab.txt")


@pytest.mark.parametrize("compress", [gzip.compress, bz2.compress, lzma.compress])
def test_compressed_corpus_reads_as_its_text(tmp_path, small_corpus, vocab_file, compress):
  text = open(os.path.join(small_corpus, "a.txt"), "rb").read()
  for name, data in (("plain", text), ("packed", compress(text))):
    (tmp_path / name / "corpus").mkdir(parents=True)
    (tmp_path / name / "corpus" / "a.txt.gz").write_bytes(data)  # the name says nothing
    build_lib.build(config(tmp_path / name / "corpus", vocab_file, tmp_path / name / "out",
                           num_out_files=1))
  assert file_bytes(tmp_path / "packed" / "out") == file_bytes(tmp_path / "plain" / "out")


def test_binary_corpus_file_is_refused_by_name(tmp_path, small_corpus, vocab_file):
  corpus = tmp_path / "corpus"
  corpus.mkdir()
  (corpus / "a.txt").write_bytes(open(os.path.join(small_corpus, "a.txt"), "rb").read())
  image = corpus / "photo.png"
  image.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 40)
  with pytest.raises(corpus_lib.CorpusError, match=f"^{image}: not text .*NUL bytes"):
    build_lib.build(config(corpus, vocab_file, tmp_path / "out"))
  image.write_bytes(bytes(range(128, 256)) * 50)  # no NUL, but no UTF-8 either
  with pytest.raises(corpus_lib.CorpusError, match=f"^{image}: not text .*not UTF-8"):
    build_lib.build(config(corpus, vocab_file, tmp_path / "out"))
  assert sorted(os.listdir(tmp_path)) == ["corpus"]


def start_build(tmp_path, vocab_file):
  """The script on the whole shared corpus with two workers, in its own process group,
  once both workers write (their shards exist in the temporary directory)."""
  corpus = tmp_path / "corpus"
  corpus.mkdir()
  os.symlink(shared_path("corpus", "english_corpus.txt"), corpus / "english.txt")
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
  process = subprocess.Popen(
      [sys.executable, os.path.join(ROOT, "build_pretraining_dataset.py"), "--corpus-dir",
       str(corpus), "--vocab-file", vocab_file, "--output-dir", str(tmp_path / "out"),
       "--num-processes", "2", "--num-out-files", "2", "--no-progress"],
      env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
      start_new_session=True,
      # As from a terminal: a test runner started in the background ignores SIGINT,
      # which its children would inherit.
      preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
  deadline = time.time() + 600
  while len(glob.glob(str(tmp_path / "out.tmp-*" / "*"))) < 2:
    assert process.poll() is None and time.time() < deadline, process.communicate()
    time.sleep(0.2)
  return process


def group_ends(pgid, seconds=60):
  deadline = time.time() + seconds
  while time.time() < deadline:
    try:
      os.killpg(pgid, 0)
    except ProcessLookupError:
      return True
    time.sleep(0.2)
  return False


@pytest.mark.slow
def test_ctrl_c_prints_one_line_and_leaves_nothing(tmp_path, vocab_file):
  process = start_build(tmp_path, vocab_file)
  os.killpg(process.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole group
  _, err = process.communicate(timeout=120)
  assert process.returncode == 130
  assert err == f"interrupted: nothing was written; {tmp_path / 'out'} is as it was\n"
  assert group_ends(process.pid)
  assert sorted(os.listdir(tmp_path)) == ["corpus"]


@pytest.mark.slow
def test_killed_build_stops_its_workers_and_the_next_run_cleans_up(tmp_path, vocab_file,
                                                                  small_corpus):
  process = start_build(tmp_path, vocab_file)
  os.kill(process.pid, signal.SIGKILL)  # the parent alone, no chance to clean up
  process.communicate()
  assert group_ends(process.pid), "the workers went on writing"
  stale = glob.glob(str(tmp_path / "out.tmp-*"))
  assert len(stale) == 1
  build_lib.build(config(small_corpus, vocab_file, tmp_path / "out", num_out_files=1))
  assert sorted(os.listdir(tmp_path)) == ["corpus", "out"]


def test_a_vocab_with_a_byte_order_mark_builds_the_same_records(tmp_path, small_corpus,
                                                                vocab_file, capsys):
  # Some Windows editors start a UTF-8 file with U+FEFF: it is no part of "[PAD]".
  marked = tmp_path / "vocab_bom.txt"
  marked.write_bytes(b"\xef\xbb\xbf" + open(vocab_file, "rb").read())
  assert load_vocab(str(marked)).pad_id == 0
  assert build_pretraining_dataset.main(
      ["--corpus-dir", small_corpus, "--vocab-file", str(marked), "--output-dir",
       str(tmp_path / "bom"), "--num-out-files", "1"]) == 0
  build_lib.build(config(small_corpus, vocab_file, tmp_path / "plain", num_out_files=1))
  assert file_bytes(tmp_path / "bom") == file_bytes(tmp_path / "plain")
  capsys.readouterr()
  # tools.tokenize reads it too.
  from tools import tokenize as tokenize_command  # pylint: disable=g-import-not-at-top
  (tmp_path / "in.txt").write_text("hello world\n", encoding="utf-8")
  assert tokenize_command.main(["--vocab-file", str(marked), "--input",
                                str(tmp_path / "in.txt"), "--output",
                                str(tmp_path / "out.jsonl")]) == 0
  assert json.loads((tmp_path / "out.jsonl").read_text())["tokens"] == ["hello", "world"]


def test_corpus_subdirectories_are_named_not_skipped_silently(tmp_path, small_corpus,
                                                              vocab_file, capsys):
  corpus = tmp_path / "corpus"
  (corpus / "AA").mkdir(parents=True)
  (corpus / "AB").mkdir()
  (corpus / "AA" / "wiki_00").write_text("Inside a subdirectory.\n")
  # Only subdirectories: refused, saying why.
  assert build_pretraining_dataset.main(
      ["--corpus-dir", str(corpus), "--vocab-file", vocab_file, "--output-dir",
       str(tmp_path / "out")]) == 2
  assert capsys.readouterr().err == (
      f"error: --corpus-dir: {corpus} holds no text files; its subdirectories (AA/, AB/) "
      f"are not read: put their files in {corpus} itself to use them\n")
  # Files beside them: built, with a note.
  (corpus / "a.txt").write_text(open(os.path.join(small_corpus, "a.txt")).read())
  assert build_pretraining_dataset.main(
      ["--corpus-dir", str(corpus), "--vocab-file", vocab_file, "--output-dir",
       str(tmp_path / "out")]) == 0
  assert (f"note: {corpus}: its subdirectories (AA/, AB/) are not read: put their files "
          f"in {corpus} itself to use them\n") in capsys.readouterr().err
