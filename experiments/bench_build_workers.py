"""The data build without TensorFlow in its processes, against the checkout before it.

Run by hand (not in CI), with a copy of the earlier code (whose tokenizer imported
TensorFlow), e.g. `git archive 7b92de7 | tar -x -C /tmp/base`:
  .venv/bin/python -m experiments.bench_build_workers --baseline /tmp/base [--rounds 3]

Measures on ../shared/data/corpus/english_corpus.txt (25 MB), in one run:
1. tokenizer tokens per CPU-second of both checkouts on the whole corpus (fresh
   processes, set-up excluded);
2. the import time of TensorFlow in a fresh process;
3. the build's wall time (the script's main(), with any import of TensorFlow and the
   workers' start-up) with 1 and 2 processes, both checkouts, in alternation for
   --rounds rounds (the 2 cores are shared with other jobs: medians, and a busy loop's
   2-vs-1 speed-up taken in each round);
4. that both checkouts write the same bytes for each process count.
Ends with one JSON line of the medians.
"""

import argparse
import json
import os
import statistics
import tempfile

from bench import BERT_VOCAB, ROOT, SHARED_DATA
from bench import bench_data_prep as common

# Run by common.child_result in the checkout under test.
_TOKENIZER_CHILD = """
import time
from data_prep.tokenizer import Tokenizer
from data_prep.vocab import load_vocab
with open({corpus!r}, encoding="utf-8") as f:
  lines = f.read().split("\\n")
tokenizer = Tokenizer(load_vocab({vocab!r}))
tokenizer.batch_ids(["set-up: ünïcode"])
t0, n = time.process_time(), 0
for i in range(0, len(lines), 4000):
  n += len(tokenizer.batch_ids(lines[i:i + 4000])[0])
print("RESULT", n / (time.process_time() - t0))
"""


def same_bytes(dir_a, dir_b):
  names = sorted(os.listdir(dir_a))
  return names == sorted(os.listdir(dir_b)) and all(
      open(os.path.join(dir_a, n), "rb").read() == open(os.path.join(dir_b, n), "rb").read()
      for n in names)


def main():
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--baseline", required=True, help="checkout of the earlier code")
  parser.add_argument("--corpus", default=os.path.join(SHARED_DATA, "corpus",
                                                       "english_corpus.txt"))
  parser.add_argument("--vocab", default=BERT_VOCAB)
  parser.add_argument("--rounds", type=int, default=3)
  args = parser.parse_args()
  corpus, baseline = os.path.abspath(args.corpus), os.path.abspath(args.baseline)
  roots = {"before (TF tokenizer)": baseline, "after (no TF)": ROOT}
  print(f"load average at start: {common.load():.2f} (2 cores shared with others)")

  tps = {name: common.child_result(_TOKENIZER_CHILD.format(corpus=corpus,
                                                           vocab=args.vocab), root)
         for name, root in roots.items()}
  tf_import = common.child_result("import time; t0 = time.time(); import tensorflow; "
                                  "print('RESULT', time.time() - t0)", ROOT)
  walls = {(name, p): [] for name in roots for p in (1, 2)}
  machine = []
  with tempfile.TemporaryDirectory() as tmp:
    corpus_dir = os.path.join(tmp, "corpus")
    os.makedirs(corpus_dir)
    os.symlink(corpus, os.path.join(corpus_dir, "english_corpus.txt"))
    for round_ in range(args.rounds):
      machine.append(common.machine_scaling())
      for processes in (1, 2):
        outs = []
        for name, root in roots.items():
          out = os.path.join(tmp, f"out{len(outs)}")
          walls[name, processes].append(
              common.build_in_child(corpus_dir, args.vocab, out, processes, root)["wall"])
          outs.append(out)
        assert same_bytes(*outs), f"{processes} process(es): the outputs differ"
      print(f"round {round_ + 1}: " + ", ".join(
          f"{name} {p}p {w[-1]:.1f}s" for (name, p), w in walls.items()) +
            f"; busy loop 2-vs-1 {machine[-1]:.2f}x; load {common.load():.2f}", flush=True)

  med = {key: statistics.median(w) for key, w in walls.items()}
  print(f"\nTensorFlow import: {tf_import:.1f} s; busy loop 2 vs 1 process: median "
        f"{statistics.median(machine):.2f}x; outputs byte-identical before/after: yes\n")
  print("| | tokenizer (tok/cpu-s) | build 1 process (wall s) | build 2 processes (wall s) "
        "| 2 vs 1 |\n|---|---|---|---|---|")
  for name in roots:
    print(f"| {name} | {tps[name]:,.0f} | {med[name, 1]:.1f} | {med[name, 2]:.1f} | "
          f"{med[name, 1] / med[name, 2]:.2f}x |")
  print(json.dumps({"tokenizer_tps": tps, "tf_import_s": tf_import,
                    "machine_2v1": statistics.median(machine),
                    "build_wall_s": {f"{n} {p}p": v for (n, p), v in med.items()},
                    "rounds": args.rounds}))


if __name__ == "__main__":
  main()
