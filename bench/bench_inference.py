"""Inference of one fine-tuned model in every deployable form, side by side.

  python -m bench.bench_inference --model-dir DIR [--model-dir DIR2 ...]
      [--work-dir WORK] [--examples 200] [--dev-examples N] [--threads 1,2]
      [--forms F1,F2] [--lengths 10,25,128] [--isa native|avx2] [--smoothing-alpha A]
      [--outlier-channels K]

The model is of any family the exports take, read from its run record: a sentence task's
(classification or regression), a tagging task's (chunking, named entities, parts of
speech) or a question answering task's (SQuAD 1.1 / 2.0, MRQA). Forms: the serving
SavedModel (raw strings, tokenizer and, for tagging and QA, windowing in the graph; QA's
answer extraction by the reader), LiteRT float32 / dynamic int8 / full int8 / mixed int8 and
ONNX float32 / dynamic int8 (tools.export's files, run through its reader), and the
PyTorch peer on the same weights (tools.export_hf's transformers directory:
AutoModelForSequenceClassification, ForTokenClassification or ForQuestionAnswering) in
float32 and with torch's dynamic int8 quantization of its encoder's Linear layers. Every
form is timed from text to its answers: the reader's tokenization and, for tagging and
QA, its records (the peer's logits go through the same reader, so every form is decoded
by the same code). Per form, in a process of its own (bench/child.py, whose peak RSS is
the form's): load time, the dev split's predictions at batch 32 (the task's dev metric:
the sentence task's own, a tagging task's entity F1 or word accuracy, or SQuAD's exact
match and F1 with SQuAD 2.0's no-answer score; and the share of labels, tags or answer
texts equal to the SavedModel's; over the first --dev-examples only when given, for a
timing that need not score the whole split), examples/s at batch 32, and batch-1 latency p50/p99
over the first --examples dev examples (a question with all its windows), one at a time;
at each further --threads count, the latency only. A form the model's family or head
cannot take (transformers has no joint QA head) is one line, and so is a form whose
process fails (the file named holds its stderr). Prints one JSON line per measurement
and a Markdown table per model.

--lengths N1,N2,...: instead, each form's batch-1 latency on one text of N tokens
([CLS] and [SEP] included), --examples calls at each N, for a sentence or tagging model:
every form runs at the text's own length (the SavedModel and the reader pad a batch to
its longest example only; the PyTorch peer, eager, takes the reader's inputs), so the
table shows what a short text costs in each.
--smoothing-alpha A: the calibrated forms exported with tools.export's outlier
migration (export/smoothing.py); --outlier-channels K: full int8 with tools.export's K
outlier channels per block apart (export/outlier_groups.py; 0: none). The exports are
rebuilt when either changes.
"""

import argparse
import hashlib
import json
import os
import shutil
import sys
import time
from typing import Optional

import numpy as np

from bench import child
from export import reader as export_reader
from finetune.qa import squad_metrics
from finetune.sentence import metrics
from finetune.tagging import metrics as tagging_metrics
from util import cli

BATCH = 32
FORMS = ("SavedModel", "LiteRT float32", "LiteRT dynamic int8", "LiteRT full int8",
         "LiteRT mixed int8", "ONNX float32", "ONNX dynamic int8", "PyTorch float32",
         "PyTorch dynamic int8")
FILES = {"LiteRT float32": "model_float32.tflite",
         "LiteRT dynamic int8": "model_dynamic_int8.tflite",
         "LiteRT full int8": "model_full_int8.tflite",
         "LiteRT mixed int8": "model_mixed_int8.tflite", "ONNX float32": "model_float32.onnx",
         "ONNX dynamic int8": "model_dynamic_int8.onnx"}
# The export writer (export/registry.py WRITERS) of each form but the SavedModel: by the
# form's first word, but a form that is a writer of its own.
WRITER = {"LiteRT": "litert", "ONNX": "onnx", "PyTorch": "huggingface",
          "LiteRT mixed int8": "litert_mixed_int8"}
# transformers' class of each family's peer.
PEER_CLASS = {"sentence": "AutoModelForSequenceClassification",
              "tagging": "AutoModelForTokenClassification",
              "qa": "AutoModelForQuestionAnswering"}


def writer_of(form: str) -> str:
  return WRITER.get(form) or WRITER.get(form.split()[0], "")


def variant_of(form: str) -> str:
  """The writer's name of a form's file (export/registry.py FORMS): "dynamic_int8"."""
  return form.split(" ", 1)[1].replace(" ", "_")


# Each family's predictions, one per example, as JSON: a sentence task's label id (or
# score), a tagging task's tags, a QA task's [answer, no-answer score (SQuAD 2.0) or null].

def _saved_model_predictions(family: str, signature, args, reader):
  """The serving signature's predictions of one batch of the dev inputs (QA's answers
  from its windows' outputs by the reader, as a user reads them)."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  if family == "sentence":
    texts_a, texts_b = args
    inputs = {"text_a": tf.constant(texts_a)}
    if texts_b is not None:
      inputs["text_b"] = tf.constant(texts_b)
    out = signature(**inputs)
    return out["score" if "score" in out else "label_id"].numpy().tolist()
  if family == "tagging":
    (sentences,) = args
    tags = signature(text=tf.constant([" ".join(words) for words in sentences]))["tag"]
    return [[t.decode() for t in row[:len(words)]]
            for row, words in zip(tags.numpy(), sentences)]
  reader.inputs(*args)
  out = signature(question=tf.constant(args[0]), context=tf.constant(args[1]))
  return _read_predictions(reader, {k: v.numpy() for k, v in out.items()
                                    if k != "window_question"})


def _read_predictions(reader, outputs) -> list:
  """The predictions of a model's outputs on the reader's last inputs, decoded by the
  reader (tagging: its tags; QA: its answer extraction)."""
  family = reader.info["family"]
  if family == "sentence":
    return outputs["score" if reader.info["regression"] else "label_id"].tolist()
  records = reader.records(outputs)
  if family == "tagging":
    return [r["tags"] for r in records]
  return [[r["answer"], r.get("no_answer_score")] for r in records]


def _peer_outputs(family: str, result, x) -> dict:
  """The transformers model's outputs as the exported model's, for the reader."""
  if family == "sentence":
    logits = result.logits.numpy()
    return {"score": logits[:, 0], "label_id": logits.argmax(-1)}
  if family == "tagging":  # every piece's logits; the tagging head's are each word's first
    return {"logits": np.take_along_axis(result.logits.numpy(),
                                         x["word_positions"][..., None], 1)}
  # The span head's -1000 outside the context (and [CLS], "no answer"), which
  # transformers' head does not add: the reader's n-best starts and ends are then ours.
  allowed = x["input_mask"] * x["segment_ids"]
  allowed[:, 0] = 1
  penalty = 1000.0 * (allowed - 1.0)
  return {"start_logits": result.start_logits.numpy() + penalty,
          "end_logits": result.end_logits.numpy() + penalty}


def _savedmodel(path: str, family: str, reader):
  # Imported here: the other forms' processes must not load TensorFlow.
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  import tensorflow_text  # pylint: disable=import-outside-toplevel,unused-import  # its ops
  signature = tf.saved_model.load(path).signatures["serving_default"]
  return lambda args: _saved_model_predictions(family, signature, args, reader)


def _torch(hf_dir: str, threads: int, int8: bool, reader):
  # Imported here: only the peer's processes load torch.
  import torch  # pylint: disable=import-outside-toplevel
  import transformers  # pylint: disable=import-outside-toplevel
  torch.set_num_threads(threads)
  family = reader.info["family"]
  model = getattr(transformers, PEER_CLASS[family]).from_pretrained(hf_dir).eval()
  if int8:  # the encoder's Linear layers: the classifier's dense carries the HF
    # export's GELU shift (tools.export_hf), which int8 activations cannot hold
    model.electra = torch.ao.quantization.quantize_dynamic(
        model.electra, {torch.nn.Linear}, dtype=torch.qint8)

  def predict(args):
    x = reader.inputs(*args)
    with torch.inference_mode():
      result = model(input_ids=torch.from_numpy(x["input_ids"]).long(),
                     attention_mask=torch.from_numpy(x["input_mask"]).long(),
                     token_type_ids=torch.from_numpy(x["segment_ids"]).long())
    return _read_predictions(reader, _peer_outputs(family, result, x))
  return predict


def _predictor(form: str, trial: str, export: str, hf_dir: str, threads: int):
  """The form loaded: the reader's input columns -> its predictions."""
  if form == "SavedModel":
    reader = export_reader.Reader(export)
    return _savedmodel(os.path.join(trial, "saved_model"), reader.info["family"], reader)
  if form.startswith("PyTorch"):
    return _torch(hf_dir, threads, "int8" in form, export_reader.Reader(export))
  reader = export_reader.Reader(export)
  model = export_reader.load_model(os.path.join(export, FILES[form]), threads)
  return lambda args: _read_predictions(reader, model(reader.inputs(*args)))


def _seconds(call, *args) -> float:
  tick = time.perf_counter()
  call(*args)
  return time.perf_counter() - tick


def _percentiles(seconds) -> dict:
  return {"p50_ms": round(1e3 * np.percentile(seconds, 50), 2),
          "p99_ms": round(1e3 * np.percentile(seconds, 99), 2)}


def run_form(form: str, trial: str, export: str, hf_dir: str, texts: str,
             examples: int, threads: int, full: bool) -> dict:
  """One form's figures (bench.child runs it in a process of its own); `texts`, a JSON
  file of the dev inputs: the columns of the reader's inputs (a column may be null)."""
  with open(texts, encoding="utf-8") as f:
    columns = json.load(f)
  start = time.perf_counter()
  predict = _predictor(form, trial, export, hf_dir, threads)
  size = len(next(c for c in columns if c is not None))
  one = lambda i, n: predict([None if c is None else c[i:i + n] for c in columns])
  one(0, 1)  # the first call builds what later calls reuse
  figures = {"form": form, "threads": threads,
             "load_s": round(time.perf_counter() - start, 2),
             **_percentiles([_seconds(one, i, 1) for i in range(min(examples, size))])}
  if full:
    predictions, tick = [], time.perf_counter()
    for i in range(0, size, BATCH):
      predictions.extend(one(i, BATCH))
    figures["batch32_per_s"] = round(size / (time.perf_counter() - tick), 1)
    figures["predictions"] = predictions
  return figures


def run_lengths(form: str, trial: str, export: str, hf_dir: str, texts: str,
                examples: int, threads: int) -> dict:
  """--lengths: one form's batch-1 latency on one text of N tokens, `examples` calls at
  each N (a process of its own); `texts`, a JSON file of {N: the reader's input
  columns of that text}."""
  with open(texts, encoding="utf-8") as f:
    by_length = json.load(f)
  start = time.perf_counter()
  predict = _predictor(form, trial, export, hf_dir, threads)
  figures = {"form": form, "threads": threads, "latency_ms": {}}
  for length, columns in by_length.items():
    predict(columns)  # a new length's first call sets up what later calls reuse
    figures.setdefault("load_s", round(time.perf_counter() - start, 2))
    figures["latency_ms"][length] = _percentiles(
        [_seconds(predict, columns) for _ in range(examples)])
  return figures


def dev_metric(gold: dict, predictions: list) -> dict:
  """The task's dev metric of a form's predictions (`gold`: prepare's)."""
  family = gold["family"]
  if family == "sentence":
    return metrics.score(gold["metrics"], np.array(gold["labels"]), np.array(predictions))
  if family == "tagging":
    return tagging_metrics.score(gold["metrics"], gold["tags"], predictions)
  answers = {qid: answer for qid, (answer, _) in zip(gold["ids"], predictions)}
  if not gold["v2"]:
    return squad_metrics.headline(squad_metrics.evaluate_v1(gold["dataset"], answers),
                                  False)
  null_odds = {qid: score for qid, (_, score) in zip(gold["ids"], predictions)}
  return squad_metrics.headline(squad_metrics.evaluate_v2(
      gold["dataset"], answers, null_odds, gold["threshold"]), True)


def agreement(gold: dict, mine: list, base: list) -> float:
  """How closely a form's predictions follow the SavedModel's: the correlation of a
  regression's scores; else the percentage of equal labels, tags (of all words), or
  answers (SQuAD 2.0: "" when the no-answer score passes the threshold)."""
  family = gold["family"]
  if family == "sentence" and gold["regression"]:
    return round(float(np.corrcoef(mine, base)[0, 1]), 4)
  if family == "tagging":
    mine, base = sum(mine, []), sum(base, [])
  elif family == "qa":
    final = lambda answer, score: "" if score is not None and score > gold[
        "threshold"] else answer
    mine, base = [final(*p) for p in mine], [final(*p) for p in base]
  return round(100 * float(np.mean([a == b for a, b in zip(mine, base)])), 1)


# What an export folder holds when whole (a form missing is rebuilt, not failed on).
BUNDLE_FILES = ("deploy.json", "vocab.txt", "reader.py")
EXPORT_FILES = (*FILES.values(), *BUNDLE_FILES)
HF_FILES = ("model.safetensors", "config.json", "vocab.txt")
STAMP = "model.json"  # the work folder's model: its exports are rebuilt when it changes
DEV_INPUTS = "dev_texts.json"
LENGTH_INPUTS = "length_texts.json"  # --lengths: one text of each length


def model_identity(trial: str) -> dict:
  """What tells one fine-tuned model from another: its folder's absolute path, and the
  size and time of its record and checkpoint files (a retrained model changes them)."""
  trial = os.path.abspath(trial)
  files = sorted(f for f in os.listdir(trial)
                 if f in ("finetuning_config.json", "checkpoint") or f.startswith("ckpt-"))
  stat = {f: os.stat(os.path.join(trial, f)) for f in files}
  return {"model_dir": trial,
          "files": {f: [s.st_size, s.st_mtime_ns] for f, s in stat.items()}}


def export_identity(trial: str, smoothing_alpha: Optional[float] = None,
                    outlier_channels: Optional[int] = None) -> dict:
  """What the work folder's exports of `trial` are (its STAMP): the model's identity
  and the exports' flags."""
  return {**model_identity(trial),
          **({} if smoothing_alpha is None else {"smoothing_alpha": smoothing_alpha}),
          # Always: exports made before full int8 kept outlier channels apart by
          # default hold no such key and are rebuilt.
          "outlier_channels": outlier_channels}


def work_folder(trial: str, work: str) -> str:
  """The model's folder under the work dir, named after the run and trial and keyed on
  the model's path (two models of the same names keep apart)."""
  name = os.path.basename(os.path.dirname(os.path.dirname(os.path.abspath(trial))))
  key = hashlib.sha1(os.path.abspath(trial).encode()).hexdigest()[:8]
  return os.path.join(work, f"{name}_{os.path.basename(os.path.abspath(trial))}_{key}")


def reuse_or_clear(folder: str, identity: dict, forms=FORMS) -> None:
  """Keeps `folder`'s exports when they are `identity`'s model's and hold the files of
  `forms`; else removes what it holds (saying why when it held another model's), for
  prepare."""
  try:
    with open(os.path.join(folder, STAMP), encoding="utf-8") as f:
      stamp = json.load(f)
  except (OSError, ValueError):
    stamp = None
  if stamp != identity:
    if stamp is not None:
      print(f"note: {folder} holds the exports of another model or of an earlier "
            f"training of {identity['model_dir']}; rebuilding them", flush=True)
    for name in ("export", "hf", DEV_INPUTS, LENGTH_INPUTS, STAMP):
      path = os.path.join(folder, name)
      if os.path.isdir(path):
        shutil.rmtree(path)
      elif os.path.exists(path):
        os.remove(path)
  needed = {"export": (*[FILES[f] for f in forms if f in FILES], *BUNDLE_FILES),
            "hf": HF_FILES if any(writer_of(f) == "huggingface" for f in forms) else ()}
  for name, files in needed.items():
    path = os.path.join(folder, name)
    if not os.path.isdir(path):
      continue
    if not all(os.path.isfile(os.path.join(path, f)) for f in files):
      why = "is missing some of its files"
    elif name == "export" and not _states_input_lengths(path):
      why = ("was written before its files' sequence axis was free (they take "
             "max_seq_length only)")
    else:
      continue
    print(f"note: {path} {why}; rebuilding it", flush=True)
    shutil.rmtree(path)


def _states_input_lengths(export: str) -> bool:
  """Whether an export's deploy.json says which length each file takes (exports since
  the sentence and tagging files' sequence axis is free do)."""
  try:
    with open(os.path.join(export, export_reader.INFO_FILE), encoding="utf-8") as f:
      return "input_lengths" in json.load(f)
  except (OSError, ValueError):
    return False


def _dev_set(loaded, dev_examples: Optional[int] = None) -> tuple:
  """(the split, the reader's input columns, what scores predictions) of the task's
  first evaluation split, read from the run's data dir (its first `dev_examples`)."""
  from finetune import tasks as task_registry  # pylint: disable=import-outside-toplevel
  task, family = loaded.task, loaded.family.name
  if not task.eval_splits:
    raise ValueError(f"{loaded.folder}: {task.name} has no dev split to measure on")
  split = task.eval_splits[0]
  dev = task_registry.read_examples(task, loaded.settings["data_dir"], split)[:dev_examples]
  gold = {"family": family}
  if family == "sentence":
    pair = dev[0].text_b is not None
    columns = [[e.text_a for e in dev], [e.text_b for e in dev] if pair else None]
    gold.update(metrics=list(task.metrics), regression=task.is_regression,
                labels=[float(e.label) if task.is_regression else task.labels.index(e.label)
                        for e in dev])
  elif family == "tagging":
    from finetune.tagging.data import as_output_tags  # pylint: disable=import-outside-toplevel
    columns = [[list(e.words) for e in dev]]
    gold.update(tags=[as_output_tags(task, e.tags) for e in dev], metrics=list(task.metrics))
  else:
    columns = [[e.question for e in dev], [e.context for e in dev], [e.qid for e in dev]]
    gold.update(ids=[e.qid for e in dev], v2=task.v2,
                threshold=loaded.runner.settings.qa_na_threshold,
                dataset=squad_metrics.gold_dataset(dev))
  return split, columns, gold


def length_inputs(loaded, lengths) -> dict:
  """{N: the reader's input columns of one text of N tokens, [CLS] and [SEP] included}
  (--lengths): the vocabulary's first one-piece word repeated (a pair task's second
  text empty; for tagging, a sentence of those words)."""
  family, longest = loaded.family.name, loaded.max_seq_length
  if family == "qa":
    raise ValueError(f"--lengths: {loaded.task.name} is a QA task, whose model runs on "
                     f"windows of max_seq_length ({longest}) whatever the text's length; "
                     "give a sentence or tagging model")
  pair = loaded.runner.serving.info(loaded.runner).get("pair", False)
  tokenizer = loaded.runner.tokenizer
  word = next(t for t in tokenizer.vocab.tokens if t.isalpha() and tokenizer.tokenize(t)
              == [t])
  shortest = 3 if pair else 2
  by_length = {}
  for n in lengths:
    if not shortest <= n <= longest:
      raise ValueError(f"--lengths {n}: expected from {shortest} ([CLS], [SEP]"
                       f"{', [SEP]' if pair else ''}) to the model's max_seq_length "
                       f"({longest}) tokens")
    words = [word] * (n - shortest)
    by_length[n] = ([[words]] if family == "tagging" else
                    [[" ".join(words)], [""] if pair else None])
  return by_length


def prepare(trial: str, folder: str, identity: dict, forms=FORMS,
            dev_examples: Optional[int] = None, lengths=None,
            smoothing_alpha: Optional[float] = None,
            outlier_channels: Optional[int] = None) -> dict:
  """Writes the exports `forms` need and the dev inputs once (with `lengths`, the
  texts of those lengths instead); returns the task, its family, what scores the dev
  predictions and why each writer the model's family or head cannot take refuses it.
  Run in a child of its own: a parent that loaded
  TensorFlow would pass its peak RSS on to the forms' processes (Linux keeps ru_maxrss
  across fork and exec)."""
  # Imported here: the forms' processes import this module and must not load TensorFlow.
  from export import huggingface, registry, source  # pylint: disable=import-outside-toplevel
  from util.files import atomic_write  # pylint: disable=import-outside-toplevel
  export, hf_dir = os.path.join(folder, "export"), os.path.join(folder, "hf")
  # First: a model the bench cannot take is refused before anything is exported.
  loaded = source.load_finetuned(trial)
  if loaded.family.name not in PEER_CLASS:
    raise ValueError(f"{trial}: fine-tuned on {loaded.task.name}; the bench takes a "
                     f"model of the {', '.join(PEER_CLASS)} families")
  split, columns, gold = ((None, length_inputs(loaded, lengths), None) if lengths
                          else _dev_set(loaded, dev_examples))
  job = registry.Job(loaded)
  writers = sorted({writer_of(f) for f in forms} - {""})
  refusals = {name: registry.WRITERS[name].refusal(job) for name in writers}
  # Only the files of the forms measured are converted (full int8's calibration is the
  # slowest of them).
  deployment = {w: [variant_of(f) for f in forms if f in FILES and writer_of(f) == w]
                for w in registry.DEPLOYMENT if w in writers and not refusals[w]}
  # Every form's process reads deploy.json (the family) and the peer the reader: the
  # bundle is written even when only the SavedModel or the peer is measured.
  deployment = deployment or {registry.DEPLOYMENT[0]: ["float32"]}
  # A form that is a writer of its own (mixed int8) has one file, no variants.
  single = [writer_of(f) for f in forms if f in FILES and writer_of(f) not in
            registry.DEPLOYMENT and not refusals[writer_of(f)]]
  if not os.path.isdir(export):
    registry.export(trial, export, [*deployment, *single], log=lambda _: None,
                    variants=deployment, smoothing_alpha=smoothing_alpha,
                    **({} if outlier_channels is None
                       else {"outlier_channels": outlier_channels}))
  if "huggingface" in writers and not refusals["huggingface"] and not os.path.isdir(hf_dir):
    huggingface.export(trial, hf_dir)
  with atomic_write(os.path.join(folder, LENGTH_INPUTS if lengths else DEV_INPUTS)) as f:
    json.dump(columns, f)
  with atomic_write(os.path.join(folder, STAMP)) as f:  # last: the folder is whole
    json.dump(identity, f)
  return {"task": loaded.task.name, "split": split, "gold": gold,
          "refusals": {name: reason for name, reason in refusals.items() if reason}}


def bench_model(trial: str, work: str, examples: int, thread_counts, isa: str,
                onednn: str = "auto", forms=FORMS, dev_examples: Optional[int] = None,
                lengths=None, smoothing_alpha: Optional[float] = None,
                outlier_channels: Optional[int] = None) -> list:
  """`smoothing_alpha`, `outlier_channels`: the exports' outlier migration and full
  int8's outlier channels (registry.export's; None: its default); they are rebuilt when
  either changes."""
  name = os.path.basename(os.path.dirname(os.path.dirname(os.path.abspath(trial))))
  folder = work_folder(trial, work)
  identity = export_identity(trial, smoothing_alpha, outlier_channels)
  made = [f for f in (folder, work) if not os.path.isdir(f)]
  os.makedirs(folder, exist_ok=True)
  reuse_or_clear(folder, identity, forms)
  try:
    task = child.measure(prepare, {"trial": trial, "folder": folder,
                                   "identity": identity, "forms": list(forms),
                                   "dev_examples": dev_examples, "lengths": lengths,
                                   "smoothing_alpha": smoothing_alpha,
                                   "outlier_channels": outlier_channels})
  except BaseException:
    if made:  # a refused model leaves no folder behind (the work dir only if empty)
      shutil.rmtree(folder, ignore_errors=True)
      if work in made and not os.listdir(work):
        os.rmdir(work)
    raise
  export, hf_dir = os.path.join(folder, "export"), os.path.join(folder, "hf")
  # (A file: an argument holds at most 128 KiB.)
  texts = os.path.join(folder, LENGTH_INPUTS if lengths else DEV_INPUTS)
  gold = task["gold"]
  sizes = {form: os.path.getsize(os.path.join(export, f)) for form, f in FILES.items()
           if os.path.isfile(os.path.join(export, f))}
  sizes["SavedModel"] = sum(os.path.getsize(os.path.join(root, f)) for root, _, files in
                            os.walk(os.path.join(trial, "saved_model")) for f in files)
  if os.path.isfile(os.path.join(hf_dir, "model.safetensors")):
    sizes["PyTorch float32"] = os.path.getsize(os.path.join(hf_dir, "model.safetensors"))
  about = {"model": name, "task": task["task"]}
  rows = []
  for form in forms:
    reason = task["refusals"].get(writer_of(form))
    if reason:  # the form cannot take this model: one line, no figures
      rows.append({**about, "form": form, "not_run": reason})
      print(json.dumps(rows[-1]), flush=True)
  for threads in thread_counts:
    for form in forms:
      if task["refusals"].get(writer_of(form)):
        continue
      kwargs = dict(form=form, trial=trial, export=export, hf_dir=hf_dir,
                    texts=texts, examples=examples, threads=threads)
      if not lengths:
        kwargs["full"] = threads == thread_counts[0]
      try:
        figures = child.measure(run_lengths if lengths else run_form, kwargs,
                                threads=threads, isa=isa, onednn=onednn)
      except child.ChildFailed as e:  # one line; the other forms are still measured
        figures = {"form": form, "threads": threads, "failed": str(e)}
      figures.update(about, mib=round(sizes.get(form, 0) / 2**20, 1))
      if "predictions" in figures:
        figures["_predictions"] = figures.pop("predictions")
        figures["dev"] = dev_metric(gold, figures["_predictions"])
      print(json.dumps({k: v for k, v in figures.items() if not k.startswith("_")}),
            flush=True)
      rows.append(figures)
  base = next((r["_predictions"] for r in rows if r["form"] == "SavedModel" and "dev" in r),
              None)
  for row in rows:
    if "_predictions" in row:
      predictions = row.pop("_predictions")
      row["agree"] = "-" if base is None else agreement(gold, predictions, base)
  return rows


def table(rows: list) -> str:
  """A Markdown table: one line per form, the thread counts' latencies side by side."""
  counts = sorted({r["threads"] for r in rows if "threads" in r})
  head = ["form", "dev", "agree", *[f"p50/p99 ms ({t}t)" for t in counts],
          "batch 32 /s", "MiB", "peak RSS MiB", "load s"]
  lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for form in FORMS:
    mine = [r for r in rows if r["form"] == form]
    if not mine:
      continue
    if "not_run" in mine[0]:
      lines.append(f"| {form} | not run: {mine[0]['not_run']} |")
      continue
    full = next((r for r in mine if "dev" in r), None)
    if full is None:  # its child failed (at the first thread count, which scores)
      lines.append(f"| {form} | failed: {mine[0]['failed']} |")
      continue
    dev = ", ".join(f"{k} {v:.2f}" for k, v in full["dev"].items())
    latency = [next((_latency(r) for r in mine if r["threads"] == t), "") for t in counts]
    lines.append("| " + " | ".join([form, dev, str(full["agree"]), *latency,
                                    str(full["batch32_per_s"]), str(full["mib"] or "-"),
                                    str(full["peak_rss_mib"]), str(full["load_s"])]) + " |")
  return "\n".join(lines)


def length_table(rows: list, lengths) -> str:
  """--lengths' Markdown table: one line per form and thread count, its batch-1
  latency on a text of each length side by side."""
  head = ["form", "threads", *[f"{n} tokens p50/p99 ms" for n in lengths],
          "peak RSS MiB", "load s"]
  lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for form in FORMS:
    for r in (r for r in rows if r["form"] == form):
      if "not_run" in r or "failed" in r:
        lines.append(f"| {form} | " + (f"not run: {r['not_run']} |" if "not_run" in r
                                       else f"{r['threads']} | failed: {r['failed']} |"))
        continue
      lines.append("| " + " | ".join([form, str(r["threads"]),
                                      *[_latency(r["latency_ms"][str(n)]) for n in lengths],
                                      str(r["peak_rss_mib"]), str(r["load_s"])]) + " |")
  return "\n".join(lines)


def _latency(figures: dict) -> str:
  """p50 / p99 ms, or "failed" for a form whose child failed."""
  if "p50_ms" not in figures:
    return "failed"
  return f"{figures['p50_ms']:.1f} / {figures['p99_ms']:.1f}"


def _counts(what: str, least: int, example: str):
  """A flag's parser of comma-separated integers, each at least `least`."""
  def parse(text: str) -> list:
    try:
      counts = [int(t) for t in text.split(",")]
    except ValueError:
      counts = []
    if not counts or min(counts) < least:
      raise argparse.ArgumentTypeError(f"{text!r}: expected {what} of at least {least}, "
                                       f"comma-separated, such as {example}")
    return counts
  return parse


thread_counts = _counts("thread counts", 1, "1,2")  # --threads
token_lengths = _counts("lengths in tokens", 2, "10,25,128")  # --lengths


def form_names(text: str) -> list:
  """--forms: comma-separated names of FORMS; the SavedModel, the reference of the
  agreement, is always measured."""
  names = [name.strip() for name in text.split(",") if name.strip()]
  unknown = [name for name in names if name not in FORMS]
  if unknown or not names:
    raise argparse.ArgumentTypeError(f"{text!r}: expected form names, comma-separated, "
                                     f"of: {', '.join(FORMS)}")
  return [form for form in FORMS if form in names or form == "SavedModel"]


def parse_args(argv=None) -> argparse.Namespace:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--model-dir", action="append", required=True,
                      help="a fine-tuned trial dir of a sentence, tagging or QA task "
                      "(repeatable)")
  parser.add_argument("--work-dir", default="/tmp/bench_inference",
                      help="exports are written (once per model) and read here")
  parser.add_argument("--examples", "--sentences", dest="examples", type=int, default=200,
                      help="dev examples (sentences, questions) timed one at a time")
  parser.add_argument("--dev-examples", type=int, default=None,
                      help="score (and time at batch 32) only the first N dev examples "
                      "(default: the whole split)")
  parser.add_argument("--threads", type=thread_counts, default=[1, 2],
                      help="comma-separated thread counts")
  parser.add_argument("--forms", type=form_names, default=list(FORMS),
                      help="comma-separated forms to measure (default: all; the "
                      "SavedModel always)")
  parser.add_argument("--lengths", type=token_lengths, default=None,
                      help="instead of the dev split: batch-1 latency on one text of each "
                      "of these lengths in tokens ([CLS] and [SEP] included), --examples "
                      "calls each (a sentence or tagging model)")
  parser.add_argument("--smoothing-alpha", default="none",
                      help="the calibrated forms' outlier migration (tools.export's "
                           "flag; default none)")
  parser.add_argument("--outlier-channels", type=int, default=None,
                      help="full int8's outlier channels per block apart (tools.export's "
                           "flag; default its default)")
  child.add_arguments(parser)
  args = parser.parse_args(argv)
  cli.check_flags(parser, args, examples={"at_least": 1}, dev_examples={"at_least": 1},
                  outlier_channels={"at_least": 0})
  cli.check_fraction_or_none(parser, args, "smoothing_alpha")
  for trial in args.model_dir:
    if not os.path.isdir(trial):
      parser.error(f"--model-dir {trial}: no such directory; expected a fine-tuned "
                   "trial dir of run_finetuning.py (<model_dir>_<trial>)")
  if os.path.exists(args.work_dir) and not os.path.isdir(args.work_dir):
    parser.error(f"--work-dir {args.work_dir}: is a file; expected a folder for the "
                 "exports")
  return args


def main(argv=None) -> int:
  args = parse_args(argv)

  def run() -> int:
    for trial in args.model_dir:
      try:
        rows = bench_model(trial, args.work_dir, args.examples, args.threads, args.isa,
                           args.onednn, args.forms, args.dev_examples, args.lengths,
                           args.smoothing_alpha, args.outlier_channels)
      except child.ChildFailed as e:  # the export's child: one line, as a refusal
        raise ValueError(str(e)) from None
      shown = length_table(rows, args.lengths) if args.lengths else table(rows)
      print(f"\n{rows[0]['model']} {rows[0]['task']} ({args.isa})\n{shown}\n", flush=True)
    return 0
  return cli.run_command(run)


if __name__ == "__main__":
  sys.exit(main())
