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
import json
import os
import time

import numpy as np

from bench import child
from finetune import deploy_reader
from finetune.sentence import metrics

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
  reader = deploy_reader.Reader(export)
  if form == "SavedModel":
    predict = _savedmodel(os.path.join(trial, "saved_model"), threads)
  elif form.startswith("PyTorch"):
    predict = _torch(hf_dir, threads, "int8" in form, reader)
  else:
    model = deploy_reader.load_model(os.path.join(export, FILES[form]), threads)
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


def prepare(trial: str, folder: str) -> dict:
  """Writes the exports and the dev inputs once; the task and dev labels. Run in a child
  of its own: a parent that loaded TensorFlow would pass its peak RSS on to the forms'
  processes (Linux keeps ru_maxrss across fork and exec)."""
  # Imported here: the forms' processes import this module and must not load TensorFlow.
  from finetune import deploy, tasks as task_registry  # pylint: disable=import-outside-toplevel
  from tools import export_hf  # pylint: disable=import-outside-toplevel
  export, hf_dir = os.path.join(folder, "export"), os.path.join(folder, "hf")
  if not os.path.isdir(export):
    deploy.export(trial, export, list(deploy.FORMATS), log=lambda _: None)
  if not os.path.isdir(hf_dir):
    export_hf.export(trial, hf_dir)
  loaded = deploy.load_finetuned(trial, "the bench takes a sentence task's model")
  task = loaded.task
  dev = task_registry.read_examples(task, loaded.settings["data_dir"], "dev")
  pair = dev[0].text_b is not None
  with open(os.path.join(folder, "dev_texts.json"), "w", encoding="utf-8") as f:
    json.dump([[e.text_a for e in dev], [e.text_b for e in dev] if pair else None], f)
  return {"task": task.name, "metrics": list(task.metrics),
          "regression": task.is_regression,
          "labels": [float(e.label) if task.is_regression else task.label_id(e.label)
                     for e in dev]}


def bench_model(trial: str, work: str, sentences: int, thread_counts, isa: str) -> list:
  name = os.path.basename(os.path.dirname(os.path.dirname(trial)))
  folder = os.path.join(work, f"{name}_{os.path.basename(trial)}")
  os.makedirs(folder, exist_ok=True)
  task = child.measure(prepare, {"trial": trial, "folder": folder})
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
      figures = child.measure(run_form, kwargs, threads=threads, isa=isa)
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


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--model-dir", action="append", required=True,
                      help="a fine-tuned sentence task's trial dir (repeatable)")
  parser.add_argument("--work-dir", default="/tmp/bench_inference",
                      help="exports are written (once) and read here")
  parser.add_argument("--sentences", type=int, default=200,
                      help="dev inputs timed one at a time")
  parser.add_argument("--threads", default="1,2", help="comma-separated thread counts")
  child.add_arguments(parser)
  args = parser.parse_args()
  counts = [int(t) for t in args.threads.split(",")]
  for trial in args.model_dir:
    rows = bench_model(trial, args.work_dir, args.sentences, counts, args.isa)
    print(f"\n{rows[0]['model']} {rows[0]['task']} ({args.isa})\n" + table(rows) + "\n",
          flush=True)


if __name__ == "__main__":
  main()
