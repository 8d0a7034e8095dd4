"""bench.compute_efficiency end to end on a tiny budget, and its fine-tuning data.

The driver runs as a subprocess (`python -m bench.compute_efficiency` from the root) on
a shared-data mirror whose corpus is cut to a few thousand lines (the rest is linked):
both pre-training arms at equal FLOPs, their exports at 1/4, 1/2 and all of the run,
seven encoders fine-tuned on RTE, the table, JSON and plot; a second run skips every
unit.
"""

import json
import math
import os
import subprocess
import sys
import time

from bench import compute_efficiency
from tests.conftest import ROOT, shared_path

STUDY = [sys.executable, "-m", "bench.compute_efficiency"]

ENCODERS = [f"{arm}@{f}" for arm in ("electra", "mlm") for f in ("1/4", "1/2", "1")] + [
    "random"]


def shared_mirror(tmp_path, corpus_lines: int):
  """A --shared-data folder: the real data linked, the corpus cut to its first lines."""
  mirror = tmp_path / "shared"
  (mirror / "corpus").mkdir(parents=True)
  for name in ("glue", "conll2000", "squad"):
    os.symlink(shared_path(name), mirror / name)
  with open(shared_path("corpus", "english_corpus.txt"), encoding="utf-8") as f:
    lines = [next(f) for _ in range(corpus_lines)]
  (mirror / "corpus" / "english_corpus.txt").write_text("".join(lines), encoding="utf-8")
  return mirror


def run_study(mirror, work, *extra):
  command = [
      *STUDY, "--work-dir", str(work), "--shared-data", str(mirror), "--model-size", "debug",
      "--vocab-size", "2000", "--budget-steps", "8", "--max-train-examples", "64",
      "--trials", "1", "--tasks", "glue/rte",
      "--pretrain-hparams", '{"train_batch_size": 8, "num_warmup_steps": 2}',
      "--mlm-hparams", '{"learning_rate": 3e-4}',
      "--finetune-hparams", '{"num_train_epochs": 1, "max_seq_length": 64}', *extra]
  return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)


def numbers(value):
  if isinstance(value, dict):
    return [n for v in value.values() for n in numbers(v)]
  if isinstance(value, list):
    return [n for v in value for n in numbers(v)]
  return [value] if isinstance(value, float) else []


def test_tiny_study_end_to_end_then_resumes_without_running(tmp_path):
  mirror, work = shared_mirror(tmp_path, 3000), tmp_path / "study"
  first = run_study(mirror, work)
  assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
  for name in ("results.md", "results.json", "glue_vs_flops.png", "timings.json"):
    assert (work / name).stat().st_size > 0, name

  table = (work / "results.md").read_text().splitlines()
  header = table[0]
  for encoder in ENCODERS:
    assert f"| {encoder} " in header, (encoder, header)
  assert any(row.startswith("| glue/rte | accuracy |") for row in table)
  assert any(row.startswith("| GLUE avg") for row in table)

  results = json.loads((work / "results.json").read_text())
  electra, mlm = results["arms"]["electra"], results["arms"]["mlm"]
  assert electra["num_train_steps"] == 8 and mlm["num_train_steps"] > 8  # cheaper steps
  assert abs(mlm["train_flops_total"] - electra["train_flops_total"]) <= \
      mlm["train_flops_per_step"]
  assert all(math.isfinite(n) for n in numbers(results))
  assert all(results["encoders"][e]["glue_avg"] is not None for e in ENCODERS)
  assert results["encoders"]["electra@1/4"]["step"] == 2
  # --mlm-hparams reach the masked-LM arm's run only.
  arms = json.loads((work / "plan.json").read_text())["plan"]["arms"]
  assert arms["mlm"]["hparams"]["learning_rate"] == 3e-4
  assert "learning_rate" not in arms["electra"]["hparams"]
  records = {arm: json.loads((work / "models" / f"{arm}_debug" / "pretrain_config.json"
                              ).read_text())["config"] for arm in ("electra", "mlm")}
  assert records["mlm"]["learning_rate"] == 3e-4 != records["electra"]["learning_rate"]
  # Scores only: no fine-tuned model is exported for serving (export_serving false).
  assert not list(work.glob("models/**/saved_model"))

  # A kept training checkpoint exported on its own: the weights of step 2, not 8.
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  exports = work / "models" / "electra_debug" / "export"
  read = lambda path: tf.train.load_checkpoint(str(path)).get_tensor(
      "electra/embeddings/word_embeddings")
  assert (read(exports / "step_2") != read(exports)).any()

  start = time.time()
  second = run_study(mirror, work)
  assert second.returncode == 0, second.stderr[-3000:]
  assert time.time() - start < 30, "a finished study should only re-print its results"
  timings = json.loads((work / "timings.json").read_text())
  assert len(timings) == 1 + 2 + len(ENCODERS)  # data, two arms, one task per encoder
  assert {t["status"] for t in timings.values()} == {"skipped"}
  assert "GLUE avg" in second.stdout

  table_only = subprocess.run([*STUDY, "--table", "--work-dir", str(work)], cwd=ROOT,
                              capture_output=True, text=True, timeout=60)
  assert table_only.returncode == 0 and table_only.stdout.strip() == "\n".join(table)


def test_other_settings_in_the_same_work_dir_and_bad_flags_fail_in_one_line(tmp_path):
  work = tmp_path / "study"
  work.mkdir()
  (work / "plan.json").write_text(json.dumps({"settings": {"trials": 5}, "plan": {},
                                              "tasks": []}))
  bad = [["--tasks", "glue/nope"], ["--trials", "0"], ["--pretrain-hparams", "[1]"],
         ["--model-size", "nope"], ["--shared-data", str(tmp_path)], ["--jobs", "x"],
         ["--shared-data", shared_path()]]
  for flags in bad:
    result = subprocess.run([*STUDY, "--work-dir", str(work), *flags], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, flags
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, \
        (flags, result.stderr)
  assert "other settings" in result.stderr


def test_finetuning_data_keeps_headers_and_quirks_and_cuts_train_files(tmp_path):
  caps = {t: 5 for t in compute_efficiency.SCHEDULES}
  args = type("Args", (), dict(work_dir=str(tmp_path), shared_data=shared_path(),
                               caps=caps, squad_train_articles=38))
  compute_efficiency.write_finetuning_data(args)
  data = tmp_path / "finetuning_data"
  source = lambda *p: open(shared_path(*p), "rb").read()
  for folder, header in (("CoLA", 0), ("SST-2", 1), ("MRPC", 1), ("STS-B", 1),
                         ("RTE", 1)):
    train = (data / folder / "train.tsv").read_bytes()
    assert train.count(b"\n") == 5 + header
    assert source("glue", folder, "train.tsv").startswith(train)  # BOM, header, rows
    # Real paths on both sides: ../shared is itself a symbolic link on many machines.
    assert os.path.realpath(data / folder / "dev.tsv") == os.path.realpath(
        shared_path("glue", folder, "dev.tsv"))
  chunk = (data / "chunk" / "train.txt").read_text()
  assert chunk.count("\n\n") == 5 and chunk.endswith("\n\n")  # 5 sentences, whole
  squad = json.loads((data / "squadv1" / "train.json").read_text())
  assert sum(len(p["qas"]) for a in squad["data"] for p in a["paragraphs"]) == 5
  dev = json.loads((data / "squadv1" / "dev.json").read_text())
  assert len(dev["data"]) == 48 - 38
