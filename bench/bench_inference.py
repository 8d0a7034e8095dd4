"""Inference of one fine-tuned sentence model in every deployable form, side by side.

  python -m bench.bench_inference --model-dir DIR [--model-dir DIR2 ...]
      [--work-dir WORK] [--sentences 200] [--threads 1,2] [--isa native|avx2]

Forms: the serving SavedModel (raw strings, tokenizer in the graph), LiteRT float32 /
dynamic int8 / full int8 and ONNX float32 / dynamic int8 (tools.export_lite's files,
run through its reader), and the PyTorch peer on the same weights (tools.export_hf's
transformers directory) in float32 and with torch's dynamic int8 quantization of its
Linear layers. Every form is timed from text, its tokenization included (the reader's
for all but the SavedModel). Per form, in a process of its own (bench/child.py, whose
peak RSS is the form's): load time, the dev set's predictions at batch 32 (the task's
dev metric and the share of labels equal to the SavedModel's), examples/s at batch 32,
and batch-1 latency p50/p99 over the first --sentences dev inputs, one at a time; at
each further --threads count, the latency only. Prints one JSON line per measurement
and a Markdown table per model.
"""

import argparse
import hashlib
import json
import os
import shutil
import sys
import time

import numpy as np

from bench import child
from export import reader as export_reader
from finetune.sentence import metrics
from util import cli

BATCH = 32
FORMS = ("SavedModel", "LiteRT float32", "LiteRT dynamic int8", "LiteRT full int8",
         "ONNX float32", "ONNX dynamic int8", "PyTorch float32", "PyTorch dynamic int8")
FILES = {"LiteRT float32": "model_float32.tflite",
         "LiteRT dynamic int8": "model_dynamic_int8.tflite",
         "LiteRT full int8": "model_full_int8.tflite", "ONNX float32": "model_float32.onnx",
         "ONNX dynamic int8": "model_dynamic_int8.onnx"}


def _savedmodel(path: str, threads: int):
  # Imported here: the other forms' processes must not load TensorFlow.
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  import tensorflow_text  # pylint: disable=import-outside-toplevel,unused-import  # its ops
  del threads  # bench.child sets TensorFlow's threads
  signature = tf.saved_model.load(path).signatures["serving_default"]

  def predict(texts_a, texts_b=None):
    inputs = {"text_a": tf.constant(texts_a)}
    if texts_b is not None:
      inputs["text_b"] = tf.constant(texts_b)
    return {k: v.numpy() for k, v in signature(**inputs).items() if k != "label"}
  return predict


def _torch(hf_dir: str, threads: int, int8: bool, reader):
  # Imported here: only the peer's processes load torch.
  import torch  # pylint: disable=import-outside-toplevel
  import transformers  # pylint: disable=import-outside-toplevel
  torch.set_num_threads(threads)
  model = transformers.ElectraForSequenceClassification.from_pretrained(hf_dir).eval()
  if int8:  # the encoder's Linear layers: the classifier's dense carries the HF
    # export's GELU shift (tools.export_hf), which int8 activations cannot hold
    model.electra = torch.ao.quantization.quantize_dynamic(
        model.electra, {torch.nn.Linear}, dtype=torch.qint8)
  regression = reader.info["regression"]

  def predict(texts_a, texts_b=None):
    x = reader.inputs(texts_a, texts_b)
    with torch.inference_mode():
      logits = model(input_ids=torch.from_numpy(x["input_ids"]).long(),
                     attention_mask=torch.from_numpy(x["input_mask"]).long(),
                     token_type_ids=torch.from_numpy(x["segment_ids"]).long()).logits
    if regression:
      return {"score": logits[:, 0].numpy()}
    return {"probabilities": torch.softmax(logits, -1).numpy(),
            "label_id": logits.argmax(-1).numpy()}
  return predict


def run_form(form: str, trial: str, export: str, hf_dir: str, texts: str,
             sentences: int, threads: int, full: bool) -> dict:
  """One form's figures (bench.child runs it in a process of its own); `texts`, a JSON
  file of the dev inputs [texts_a, texts_b or null]."""
  with open(texts, encoding="utf-8") as f:
    texts_a, texts_b = json.load(f)
  start = time.perf_counter()
  reader = export_reader.Reader(export)
  if form == "SavedModel":
    predict = _savedmodel(os.path.join(trial, "saved_model"), threads)
  elif form.startswith("PyTorch"):
    predict = _torch(hf_dir, threads, "int8" in form, reader)
  else:
    model = export_reader.load_model(os.path.join(export, FILES[form]), threads)
    predict = lambda a, b=None: model(reader.inputs(a, b))
  pair = texts_b is not None
  one = lambda i, n: predict(texts_a[i:i + n], texts_b[i:i + n] if pair else None)
  one(0, 1)  # the first call builds what later calls reuse
  figures = {"form": form, "threads": threads,
             "load_s": round(time.perf_counter() - start, 2)}
  latencies = []
  for i in range(sentences):
    tick = time.perf_counter()
    one(i, 1)
    latencies.append(time.perf_counter() - tick)
  figures.update(p50_ms=round(1e3 * np.percentile(latencies, 50), 2),
                 p99_ms=round(1e3 * np.percentile(latencies, 99), 2))
  if full:
    outputs, tick = [], time.perf_counter()
    for i in range(0, len(texts_a), BATCH):
      outputs.append(one(i, BATCH))
    figures["batch32_per_s"] = round(len(texts_a) / (time.perf_counter() - tick), 1)
    key = "score" if reader.info["regression"] else "label_id"
    figures["predictions"] = np.concatenate([o[key] for o in outputs]).tolist()
  return figures


# What an export folder holds when whole (a form missing is rebuilt, not failed on).
EXPORT_FILES = (*FILES.values(), "deploy.json", "vocab.txt", "reader.py")
HF_FILES = ("model.safetensors", "config.json", "vocab.txt")
STAMP = "model.json"  # the work folder's model: its exports are rebuilt when it changes


def model_identity(trial: str) -> dict:
  """What tells one fine-tuned model from another: its folder's absolute path, and the
  size and time of its record and checkpoint files (a retrained model changes them)."""
  trial = os.path.abspath(trial)
  files = sorted(f for f in os.listdir(trial)
                 if f in ("finetuning_config.json", "checkpoint") or f.startswith("ckpt-"))
  stat = {f: os.stat(os.path.join(trial, f)) for f in files}
  return {"model_dir": trial,
          "files": {f: [s.st_size, s.st_mtime_ns] for f, s in stat.items()}}


def work_folder(trial: str, work: str) -> str:
  """The model's folder under the work dir, named after the run and trial and keyed on
  the model's path (two models of the same names keep apart)."""
  name = os.path.basename(os.path.dirname(os.path.dirname(os.path.abspath(trial))))
  key = hashlib.sha1(os.path.abspath(trial).encode()).hexdigest()[:8]
  return os.path.join(work, f"{name}_{os.path.basename(os.path.abspath(trial))}_{key}")


def reuse_or_clear(folder: str, identity: dict) -> None:
  """Keeps `folder`'s exports when they are `identity`'s model's and whole; else
  removes what it holds (saying why when it held another model's), for prepare."""
  try:
    with open(os.path.join(folder, STAMP), encoding="utf-8") as f:
      stamp = json.load(f)
  except (OSError, ValueError):
    stamp = None
  if stamp != identity:
    if stamp is not None:
      print(f"note: {folder} holds the exports of another model or of an earlier "
            f"training of {identity['model_dir']}; rebuilding them", flush=True)
    for name in ("export", "hf", "dev_texts.json", STAMP):
      path = os.path.join(folder, name)
      if os.path.isdir(path):
        shutil.rmtree(path)
      elif os.path.exists(path):
        os.remove(path)
  for name, needed in (("export", EXPORT_FILES), ("hf", HF_FILES)):
    path = os.path.join(folder, name)
    if os.path.isdir(path) and not all(os.path.isfile(os.path.join(path, f))
                                       for f in needed):
      print(f"note: {path} is missing some of its files; rebuilding it", flush=True)
      shutil.rmtree(path)


def prepare(trial: str, folder: str, identity: dict) -> dict:
  """Writes the exports and the dev inputs once; the task and dev labels. Run in a child
  of its own: a parent that loaded TensorFlow would pass its peak RSS on to the forms'
  processes (Linux keeps ru_maxrss across fork and exec)."""
  # Imported here: the forms' processes import this module and must not load TensorFlow.
  from export import huggingface, registry, source  # pylint: disable=import-outside-toplevel
  from finetune import tasks as task_registry  # pylint: disable=import-outside-toplevel
  from util.files import atomic_write  # pylint: disable=import-outside-toplevel
  export, hf_dir = os.path.join(folder, "export"), os.path.join(folder, "hf")
  # First: a model the bench cannot take is refused before anything is exported.
  loaded = source.load_finetuned(trial, family="sentence",
                                 needs="the bench takes a sentence task's model")
  if not os.path.isdir(export):
    registry.export(trial, export, list(registry.DEPLOYMENT), log=lambda _: None)
  if not os.path.isdir(hf_dir):
    huggingface.export(trial, hf_dir)
  task = loaded.task
  dev = task_registry.read_examples(task, loaded.settings["data_dir"], "dev")
  pair = dev[0].text_b is not None
  with atomic_write(os.path.join(folder, "dev_texts.json")) as f:
    json.dump([[e.text_a for e in dev], [e.text_b for e in dev] if pair else None], f)
  with atomic_write(os.path.join(folder, STAMP)) as f:  # last: the folder is whole
    json.dump(identity, f)
  return {"task": task.name, "metrics": list(task.metrics),
          "regression": task.is_regression,
          "labels": [float(e.label) if task.is_regression else task.label_id(e.label)
                     for e in dev]}


def bench_model(trial: str, work: str, sentences: int, thread_counts, isa: str,
                onednn: str = "auto") -> list:
  name = os.path.basename(os.path.dirname(os.path.dirname(os.path.abspath(trial))))
  folder = work_folder(trial, work)
  identity = model_identity(trial)
  made = [f for f in (folder, work) if not os.path.isdir(f)]
  os.makedirs(folder, exist_ok=True)
  reuse_or_clear(folder, identity)
  try:
    task = child.measure(prepare, {"trial": trial, "folder": folder,
                                   "identity": identity})
  except BaseException:
    if made:  # a refused model leaves no folder behind (the work dir only if empty)
      shutil.rmtree(folder, ignore_errors=True)
      if work in made and not os.listdir(work):
        os.rmdir(work)
    raise
  export, hf_dir = os.path.join(folder, "export"), os.path.join(folder, "hf")
  texts = os.path.join(folder, "dev_texts.json")  # an argument holds at most 128 KiB
  labels = np.array(task["labels"])
  sizes = {form: os.path.getsize(os.path.join(export, f)) for form, f in FILES.items()}
  sizes["SavedModel"] = sum(os.path.getsize(os.path.join(root, f)) for root, _, files in
                            os.walk(os.path.join(trial, "saved_model")) for f in files)
  sizes["PyTorch float32"] = os.path.getsize(os.path.join(hf_dir, "model.safetensors"))
  rows = []
  for threads in thread_counts:
    for form in FORMS:
      kwargs = dict(form=form, trial=trial, export=export, hf_dir=hf_dir,
                    texts=texts, sentences=sentences,
                    threads=threads, full=threads == thread_counts[0])
      figures = child.measure(run_form, kwargs, threads=threads, isa=isa,
                              onednn=onednn)
      figures.update(model=name, task=task["task"], mib=round(sizes.get(form, 0) / 2**20, 1))
      if "predictions" in figures:
        predictions = np.array(figures.pop("predictions"))
        figures["dev"] = metrics.score(task["metrics"], labels, predictions)
        figures["_predictions"] = predictions
      print(json.dumps({k: v for k, v in figures.items() if not k.startswith("_")}),
            flush=True)
      rows.append(figures)
  base = next(r["_predictions"] for r in rows if r["form"] == "SavedModel" and "dev" in r)
  for row in rows:
    if "_predictions" in row:
      mine = row.pop("_predictions")
      row["agree"] = (round(float(np.corrcoef(mine, base)[0, 1]), 4) if task["regression"]
                      else round(100 * float(np.mean(mine == base)), 1))
  return rows


def table(rows: list) -> str:
  """A Markdown table: one line per form, the thread counts' latencies side by side."""
  counts = sorted({r["threads"] for r in rows})
  head = ["form", "dev", "agree", *[f"p50/p99 ms ({t}t)" for t in counts],
          "batch 32 /s", "MiB", "peak RSS MiB", "load s"]
  lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for form in FORMS:
    mine = [r for r in rows if r["form"] == form]
    full = next(r for r in mine if "dev" in r)
    dev = ", ".join(f"{k} {v:.2f}" for k, v in full["dev"].items())
    latency = [next((f"{r['p50_ms']:.1f} / {r['p99_ms']:.1f}" for r in mine
                     if r["threads"] == t), "") for t in counts]
    lines.append("| " + " | ".join([form, dev, str(full["agree"]), *latency,
                                    str(full["batch32_per_s"]), str(full["mib"] or "-"),
                                    str(full["peak_rss_mib"]), str(full["load_s"])]) + " |")
  return "\n".join(lines)


def thread_counts(text: str) -> list:
  """--threads: comma-separated counts, each at least 1."""
  try:
    counts = [int(t) for t in text.split(",")]
  except ValueError:
    counts = []
  if not counts or min(counts) < 1:
    raise argparse.ArgumentTypeError(f"{text!r}: expected thread counts of at least 1, "
                                     "comma-separated, such as 1,2")
  return counts


def parse_args(argv=None) -> argparse.Namespace:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--model-dir", action="append", required=True,
                      help="a fine-tuned sentence task's trial dir (repeatable)")
  parser.add_argument("--work-dir", default="/tmp/bench_inference",
                      help="exports are written (once per model) and read here")
  parser.add_argument("--sentences", type=int, default=200,
                      help="dev inputs timed one at a time")
  parser.add_argument("--threads", type=thread_counts, default=[1, 2],
                      help="comma-separated thread counts")
  child.add_arguments(parser)
  args = parser.parse_args(argv)
  cli.check_flags(parser, args, sentences={"at_least": 1})
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
      rows = bench_model(trial, args.work_dir, args.sentences, args.threads, args.isa,
                         args.onednn)
      print(f"\n{rows[0]['model']} {rows[0]['task']} ({args.isa})\n" + table(rows) + "\n",
            flush=True)
    return 0
  return cli.run_command(run)


if __name__ == "__main__":
  sys.exit(main())
