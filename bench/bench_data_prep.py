"""Data-preparation throughput and memory, side by side with a pure-Python pipeline.

Run by hand (not in CI):  .venv/bin/python -m bench.bench_data_prep [--corpus FILE]

Measures, on ../shared/data/corpus/english_corpus.txt with the BERT uncased vocab:
1. tokenizer tokens/s: data_prep.tokenizer (C-level normalization and split, cached WordPiece)
   against tests.reference_tokenizer (BERT FullTokenizer-style pure Python), on the
   same lines in the same run;
2. whole-build tokens/s in one process: build_pretraining_dataset.py against a
   pure-Python pipeline written like the original (FullTokenizer-style tokenizer, the
   same packing, one tf.train.Example protobuf per record, TFRecordWriter);
3. scaling from 1 to 2 processes (corpus twice over, so start-up weighs less);
4. peak resident memory per process at corpus sizes x1 and x2 (it must not grow).
Builds run in fresh subprocesses; the machine load (uptime) is printed with the table.
Throughput per process is in tokens per CPU-second (the 2 cores are shared with other
people's jobs, which skews wall-clock rates); scaling is in wall-clock time.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

from bench import BERT_VOCAB, ROOT, SHARED_DATA, check_files, child
from util import cli

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# Runs the real script of the checkout it starts in (the child's cwd, first on its
# sys.path) and reports its own and its workers' peak memory.
_BUILD_CHILD = """
import json, resource, time
import build_pretraining_dataset as script
from data_prep import build
stats = []
original = build.build
build.build = lambda config: stats.append(original(config)) or stats[-1]
t0 = time.time()
assert script.main({argv!r}) == 0
wall = time.time() - t0
kb = lambda who: resource.getrusage(who).ru_maxrss / 1024
print("RESULT", json.dumps(dict(wall=wall, tokens=stats[0].tokens,
      loop=stats[0].loop_seconds, loop_cpu=stats[0].loop_cpu_seconds,
      rss_self=kb(resource.RUSAGE_SELF),
      rss_children=kb(resource.RUSAGE_CHILDREN))))
"""


def load():
  return os.getloadavg()[0]


def _busy(n):
  t0, total = time.perf_counter(), 0
  for i in range(n):
    total += i * i
  return time.perf_counter() - t0


def machine_scaling(n=30_000_000):
  """What 2 processes gain over 1 on this machine right now, for a plain CPU loop.

  With other people's jobs on the 2 cores this can be far below 2x; the build's own
  speed-up is to be read against it.
  """
  import multiprocessing
  one = _busy(n)
  with multiprocessing.get_context("spawn").Pool(2) as pool:
    t0 = time.perf_counter()
    pool.map(_busy, [n // 2, n // 2])
    two = time.perf_counter() - t0
  return one / two


def build_in_child(corpus_dir, vocab, out, processes, root=ROOT):
  """The build of the checkout at `root` (this one by default), in a fresh process."""
  argv = ["--corpus-dir", corpus_dir, "--vocab-file", vocab, "--output-dir", out,
          "--num-processes", str(processes), "--overwrite", "--no-progress"]
  return child_result(_BUILD_CHILD.format(argv=argv), root)


def child_result(code: str, root: str = ROOT):
  """Runs Python `code` in a fresh process in `root` (whose modules it imports); the JSON
  of its last RESULT line."""
  result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False, cwd=root)
  if result.returncode:
    raise child.failed(f"a child in {root}", result.returncode, result.stderr)
  line = [l for l in result.stdout.splitlines() if l.startswith("RESULT ")][-1]
  return json.loads(line[len("RESULT "):])


def bench_tokenizers(corpus, vocab_file, sample_every):
  from tests.reference_tokenizer import ReferenceTokenizer
  from data_prep.tokenizer import Tokenizer, get_patterns
  from data_prep.vocab import load_vocab
  vocab = load_vocab(vocab_file)
  try:
    with open(corpus, encoding="utf-8") as f:
      lines = f.read().split("\n")
  except UnicodeDecodeError as e:
    raise ValueError(f"--corpus {corpus}: not UTF-8 text (byte {e.start}); expected a "
                     "UTF-8 text corpus") from None
  sample = lines[::sample_every]
  fast = Tokenizer(vocab)
  get_patterns()  # one-off set-up (about a second), not throughput
  fast.batch_ids(sample[:10])

  def run_fast(texts):
    t0, n = time.process_time(), 0
    for i in range(0, len(texts), 4000):
      n += len(fast.batch_ids(texts[i:i + 4000])[0])
    return n, time.process_time() - t0

  reference = ReferenceTokenizer(vocab.ids)
  t0 = time.process_time()
  n_ref = sum(len(reference.ids(line)) for line in sample)
  t_ref = time.process_time() - t0
  if not n_ref:  # nothing to time
    taken = (f" in the lines --sample-every {sample_every} takes"
             if any(map(str.strip, lines)) else "")
    raise ValueError(f"--corpus {corpus}: no text{taken}; expected a UTF-8 text corpus")
  n_fast, t_fast = run_fast(sample)
  assert n_fast == n_ref
  n_all, t_all = run_fast(lines)
  return {"sample_tokens": n_ref, "reference_tps": n_ref / t_ref,
          "fast_tps_sample": n_fast / t_fast, "fast_tps_corpus": n_all / t_all,
          "corpus_tokens": n_all}


def bench_python_pipeline(corpus, vocab_file, max_lines, out_dir):
  """The original's pipeline shape in pure Python (tokenizer, packing, protobuf)."""
  import tensorflow as tf
  from data_prep.examples import ExampleBuilder
  from tests.reference_tokenizer import ReferenceTokenizer
  from data_prep.vocab import load_vocab
  vocab = load_vocab(vocab_file)
  tokenizer = ReferenceTokenizer(vocab.ids)
  builder = ExampleBuilder(128, vocab.cls_id, vocab.sep_id, random.Random(0))
  ints = lambda v: tf.train.Feature(int64_list=tf.train.Int64List(value=v))
  t0, tokens = time.process_time(), 0
  with tf.io.TFRecordWriter(os.path.join(out_dir, "python.tfrecord")) as writer, \
      open(corpus, encoding="utf-8") as f:
    for i, line in enumerate(f):
      if max_lines is not None and i >= max_lines:
        break
      line = line.strip()
      if line:
        ids = tokenizer.ids(line)
        tokens += len(ids)
        example = builder.add_line(ids)
      else:
        example = builder.end_document()
      if example:  # the lists the original builds, one protobuf per record
        padding = [0] * (128 - example.num_real)
        mask = [1] * example.num_real + padding
        segments = [0] * example.a_end + [1] * (example.num_real - example.a_end) + padding
        writer.write(tf.train.Example(features=tf.train.Features(feature={
            "input_ids": ints(example.input_ids), "input_mask": ints(mask),
            "segment_ids": ints(segments)})).SerializeToString())
  return tokens / (time.process_time() - t0)


def parse_args(argv=None) -> argparse.Namespace:
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--corpus", default=os.path.join(SHARED_DATA, "corpus",
                                                       "english_corpus.txt"))
  parser.add_argument("--vocab", default=BERT_VOCAB)
  parser.add_argument("--sample-every", type=int, default=10,
                      help="tokenizer comparison on every n-th line (default: 10)")
  parser.add_argument("--python-lines", type=int, default=None,
                      help="lines for the pure-Python pipeline (default: all)")
  parser.add_argument("--skip-scaling", action="store_true")
  args = parser.parse_args(argv)
  cli.check_flags(parser, args, sample_every={"at_least": 1},
                  python_lines={"at_least": 1})
  check_files(parser, args, "corpus", "vocab")
  return args


def main(argv=None) -> int:
  args = parse_args(argv)
  return cli.run_command(lambda: measure(args))


def measure(args: argparse.Namespace) -> int:
  """Every measurement in turn, each row printed as it is taken; then the table."""
  corpus = os.path.abspath(args.corpus)
  rows = []

  def row(name, value, note=""):
    rows.append((name, value, note))
    print(f"{name:<48} {value:>14}  {note}", flush=True)

  print(f"load average at start: {load():.2f} (2 cores shared with others)")
  tok = bench_tokenizers(corpus, args.vocab, args.sample_every)
  row("tokenizer, pure-Python reference (tok/cpu-s)", f"{tok['reference_tps']:,.0f}",
      f"{tok['sample_tokens']:,} tokens, every {args.sample_every}th line")
  row("tokenizer, fast, same lines (tok/cpu-s)", f"{tok['fast_tps_sample']:,.0f}",
      f"{tok['fast_tps_sample'] / tok['reference_tps']:.1f}x the reference")
  row("tokenizer, fast, whole corpus (tok/cpu-s)", f"{tok['fast_tps_corpus']:,.0f}",
      f"{tok['corpus_tokens']:,} tokens; load {load():.2f}")

  with tempfile.TemporaryDirectory() as tmp:
    python_tps = bench_python_pipeline(corpus, args.vocab, args.python_lines, tmp)
    row("build, pure-Python pipeline, 1 process (tok/cpu-s)", f"{python_tps:,.0f}",
        f"{'all' if args.python_lines is None else args.python_lines} lines; "
        f"load {load():.2f}")
    once, twice = os.path.join(tmp, "x1"), os.path.join(tmp, "x2")
    for folder, copies in ((once, 1), (twice, 2)):
      os.makedirs(folder)
      for i in range(copies):
        os.symlink(corpus, os.path.join(folder, f"part{i}.txt"))
    out = os.path.join(tmp, "out")
    one = build_in_child(once, args.vocab, out, 1)
    row("build, this project, 1 process (tok/cpu-s)", f"{one['tokens'] / one['loop_cpu']:,.0f}",
        f"read-tokenize-pack-write loop: {one['tokens'] / one['loop_cpu'] / python_tps:.1f}x "
        f"the pure-Python pipeline; load {load():.2f}")
    row("build, this project, 1 process (wall s)", f"{one['wall']:.1f}",
        f"main() after imports (TF start-up, tokenizer set-up, loop: {one['loop']:.1f}s)")
    one2 = build_in_child(twice, args.vocab, out, 1)
    row("peak RSS, 1 process, corpus x1 / x2 (MB)",
        f"{one['rss_self']:.0f} / {one2['rss_self']:.0f}", "must not grow with the corpus")
    if not args.skip_scaling:
      row("machine: busy loop, 2 processes vs 1 (speed-up)", f"{machine_scaling():.2f}x",
          f"what the shared cores allow now; load {load():.2f}")
      two = build_in_child(twice, args.vocab, out, 2)
      row("build x2 corpus, 1 process (wall s / loop s)",
          f"{one2['wall']:.1f} / {one2['loop']:.1f}",
          f"load {load():.2f}")
      row("build x2 corpus, 2 processes (wall s / loop s)",
          f"{two['wall']:.1f} / {two['loop']:.1f}",
          f"speed-up {one2['wall'] / two['wall']:.2f}x wall, "
          f"{one2['loop'] / two['loop']:.2f}x loop (slowest worker); load {load():.2f}")
      row("peak RSS per worker, 2 processes (MB)", f"{two['rss_children']:.0f}",
          f"parent {two['rss_self']:.0f}")
  print("\n| measurement | value | note |\n|---|---|---|")
  for name, value, note in rows:
    print(f"| {name} | {value} | {note} |")
  return 0


if __name__ == "__main__":
  sys.exit(main())
