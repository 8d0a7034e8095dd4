"""Quantization-aware fine-tuning for LiteRT's full int8 (issue 63): does a short
continuation of fine-tuning with int8 fake quantization let integer-only int8 hold on a
real pre-trained encoder?

  python -m experiments.int8_qat --model-dir TRIAL_DIR --work-dir WORK
      [--epochs 1] [--learning-rate 5e-5] [--range-every 25] [--timing-steps 8]

TRIAL_DIR is a fine-tuned sentence or tagging model (run_finetuning.py's trial dir).
The encoder is run again from its own sublayers (model/internals.py block_layers, the
post-LayerNorm block tf-models computes, checked against the model's own output) with
tf.quantization.fake_quant_with_min_max_vars (per-tensor, 8 bits, asymmetric, as the
converter's activations) at every activation the full-int8 file holds in int8: the
embeddings' sum and LayerNorm output, the query, key and value projections and the
scaled query, the attention's context and output, both residual sums, both LayerNorm
outputs, the FFN's intermediate dense (the GELU's input), the GELU's output, the FFN's
output and the head's. The softmax and the attention's batched products stay float32,
as export/litert.py keeps them; weights are not fake-quantized (per-channel int8
weights alone, LiteRT's dynamic int8, cost under 0.1 point on MiniLM). Each range is
the tensor's min and max over the export's own calibration examples (export/registry.py
Job.calibration: the same seeded training rows), recomputed with the current weights
every --range-every steps, so that the ranges trained against are those the converter
calibrates at export. Training: the task's training split (as its run prepared it), at
max_seq_length, Adam with 10% warmup and linear decay, no dropout (the fused training
layers would bypass the fake quantization; the model's inference call is used), the
runner's own loss.

Writes into WORK: qat/ (a fine-tuned model dir of the QAT weights, which tools.export
and bench.bench_inference read), float_export/ and qat_export/ (tools.export's LiteRT
files: float32, dynamic, full and mixed int8 of the float model, float32 and full int8
of the QAT model), results.json and a Markdown table: each
file's dev metrics (the runner's own scoring, on the dev split at max_seq_length), the
training graph's fake-quantized outputs, of the float and of the QAT model, against
their full-int8 files' (correlation, max difference), and float against QAT steps/s, timed in this process on the same
batches. Each stage is skipped when its output exists (a re-run resumes).
"""

import argparse
import json
import os
import shutil
import sys
import time
from typing import Dict

import numpy as np
import tensorflow as tf
import tf_keras

from export import litert, reader as export_reader
from export.registry import Job, export
from export.source import Finetuned, load_finetuned
from finetune import tasks as task_registry
from model.internals import attention_scale, block_layers
from runs.model_files import CHECKPOINT_NAME
from util import cli

# What tf_keras' masked softmax adds to masked-off float32 scores.
MASK_ADDER = -1e9
FILE_FORMS = ("float32", "dynamic_int8", "full_int8", "mixed_int8")
QAT_FORMS = ("float32", "full_int8")
_BATCH = 32


class FakeQuant:
  """The activation points' int8 ranges: `observe` records each point's min and max,
  `quantize` fake-quantizes it with its recorded range, `off` passes it."""

  def __init__(self):
    self.mode, self.lows, self.highs, self.seen = "off", {}, {}, {}

  def __call__(self, name: str, x):
    if self.mode == "off":
      return x
    if self.mode == "observe":
      self.seen[name] = (tf.reduce_min(x), tf.reduce_max(x))
      return x
    return tf.quantization.fake_quant_with_min_max_vars(x, self.lows[name],
                                                        self.highs[name], num_bits=8)

  def set_ranges(self, ranges: Dict[str, np.ndarray]):
    for name, (low, high) in ranges.items():
      if name not in self.lows:
        self.lows[name] = tf.Variable(0.0, trainable=False)
        self.highs[name] = tf.Variable(0.0, trainable=False)
      self.lows[name].assign(min(float(low), 0.0))
      self.highs[name].assign(max(float(high), 0.0))


def encoder_forward(encoder, batch, quant: FakeQuant):
  """The encoder's inference output [B, T, H], computed from its sublayers with `quant`
  at each activation point (see the module's docstring)."""
  embeddings = encoder.embeddings
  ids = batch["input_ids"]
  words = embeddings.word_embeddings(ids)
  x = quant("embeddings/sum", words + embeddings.position_embeddings(words)
            + embeddings.token_type_embeddings(batch["segment_ids"]))
  x = quant("embeddings/norm", embeddings.layer_norm(x))
  if encoder.embeddings_project is not None:  # (embedding width != hidden size)
    x = quant("embeddings/project", encoder.embeddings_project(x))
  # [B, 1, T, T]: padding columns off (ElectraEncoder.attention_mask, bidirectional).
  mask = encoder.attention_mask(batch["input_mask"], tf.shape(ids)[1])[:, None]
  for index, block in enumerate(encoder.transformer_layers):
    layers, name = block_layers(block), f"layer_{index}/"
    query = quant(name + "query", layers.query(x))  # [B, T, N, H]
    key = quant(name + "key", layers.key(x))
    value = quant(name + "value", layers.value(x))
    query = quant(name + "query_scaled", query * attention_scale(block))
    scores = tf.einsum("aecd,abcd->acbe", key, query) + (1.0 - mask) * MASK_ADDER
    context = tf.einsum("acbe,aecd->abcd", tf.nn.softmax(scores, -1), value)
    attended = quant(name + "attention_output",
                     layers.attention_output(quant(name + "context", context)))
    summed = quant(name + "attention_sum", x + attended)
    x = quant(name + "attention_norm", layers.attention_norm(summed))
    inner = quant(name + "intermediate", layers.intermediate(x))
    inner = quant(name + "gelu", layers.intermediate_activation(inner))
    out = quant(name + "output", layers.output(inner))
    summed = quant(name + "output_sum", out + x)
    x = quant(name + "output_norm", layers.output_norm(summed))
  return x


def model_forward(finetuned: Finetuned, batch, quant: FakeQuant):
  """The head's output on `batch` through encoder_forward, fake-quantized as the file's."""
  head = finetuned.model.heads[finetuned.runner.head_name]
  return quant("head", head(encoder_forward(finetuned.model.encoder, batch, quant), batch,
                            training=False))


def batches(features: Dict[str, np.ndarray], order: np.ndarray):
  for start in range(0, len(order), _BATCH):
    chosen = order[start:start + _BATCH]
    yield {k: tf.constant(v[chosen]) for k, v in features.items()}


def observe_ranges(finetuned: Finetuned, quant: FakeQuant, calibration) -> None:
  """Sets quant's ranges to each point's min and max over the calibration rows, with the
  model's current weights (what the converter's calibration records)."""
  quant.mode, quant.seen = "observe", {}
  observed = tf.function(lambda batch: (model_forward(finetuned, batch, quant), quant.seen)[1])
  low, high = {}, {}
  for batch in batches(calibration, np.arange(len(calibration["input_ids"]))):
    for name, (lo, hi) in observed(batch).items():
      low[name] = min(low.get(name, np.inf), float(lo))
      high[name] = max(high.get(name, -np.inf), float(hi))
  quant.set_ranges({name: (low[name], high[name]) for name in low})
  quant.mode = "quantize"


def outputs_of(finetuned: Finetuned, quant: FakeQuant, features) -> np.ndarray:
  """model_forward's outputs on every row of `features`, in batches."""
  forward = tf.function(lambda batch: model_forward(finetuned, batch, quant))
  return np.concatenate([forward(b).numpy() for b in
                         batches(features, np.arange(len(features["input_ids"])))])


def split_features(finetuned: Finetuned, split: str, data_dir: str):
  runner, task = finetuned.runner, finetuned.task
  examples = task_registry.read_examples(task, data_dir, split)
  examples = runner.prepare_examples(examples, split)
  return examples, runner.features(examples, split)


def train(finetuned: Finetuned, quant: FakeQuant, calibration, features, args, log):
  """QAT over args.epochs of `features`; returns (QAT steps/s, float steps/s), timed on
  the first args.timing_steps batches (the weights put back after the timing)."""
  model, runner = finetuned.model, finetuned.runner
  variables = model.trainable_variables
  rows = len(features["input_ids"])
  steps = max(1, int(args.epochs * rows) // _BATCH)
  warmup = max(1, steps // 10)

  def rate(step: int) -> float:  # 10% warmup, then linear decay to 0
    return args.learning_rate * min(step / warmup, max(0.0, (steps - step) / (steps - warmup)))
  learning_rate = tf.Variable(0.0, trainable=False)
  optimizer = tf_keras.optimizers.legacy.Adam(learning_rate)

  @tf.function
  def step_fn(batch):
    with tf.GradientTape() as tape:
      loss = tf.reduce_mean(runner.loss(model_forward(finetuned, batch, quant), batch))
    optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
    return loss

  rng = np.random.default_rng(args.seed)
  orders = [rng.permutation(rows) for _ in range(int(np.ceil(args.epochs)) or 1)]
  stream = [b for order in orders for b in batches(features, order)][:steps]

  # Timing: float (quant off) and QAT steps on the same batches, the first of each mode
  # (its tracing) left out; then the weights and the optimizer as they were.
  saved = [v.numpy() for v in variables]
  observe_ranges(finetuned, quant, calibration)
  speeds = {}
  timed = stream[:args.timing_steps + 1]
  learning_rate.assign(args.learning_rate)
  for mode in ("off", "quantize"):
    quant.mode = mode
    step_fn = tf.function(step_fn.python_function)  # traced anew for the mode
    step_fn(timed[0])
    start = time.perf_counter()
    for batch in timed[1:]:
      step_fn(batch).numpy()
    speeds[mode] = (len(timed) - 1) / (time.perf_counter() - start)
  for variable, value in zip(variables, saved):
    variable.assign(value)
  for slot in optimizer.variables():
    slot.assign(tf.zeros_like(slot))
  log(f"steps/s: float {speeds['off']:.3f}, QAT {speeds['quantize']:.3f} "
      f"({args.timing_steps} steps each)")

  quant.mode = "quantize"
  step_fn = tf.function(step_fn.python_function)
  losses = []
  for index, batch in enumerate(stream):
    if index % args.range_every == 0:
      observe_ranges(finetuned, quant, calibration)
    learning_rate.assign(rate(index + 1))
    losses.append(float(step_fn(batch)))
    if (index + 1) % 10 == 0 or index + 1 == steps:
      log(f"QAT step {index + 1}/{steps}: loss {np.mean(losses[-10:]):.4f}")
  return speeds["quantize"], speeds["off"], steps


def save_model_dir(finetuned: Finetuned, source: str, target: str) -> None:
  """`target`: `source`'s run files with a checkpoint of the model's current weights."""
  tmp = target + ".tmp"
  shutil.rmtree(tmp, ignore_errors=True)
  shutil.copytree(source, tmp, ignore=lambda folder, names: [
      n for n in names if n.startswith(CHECKPOINT_NAME) or n == "checkpoint"
      or os.path.isdir(os.path.join(folder, n))])
  tf.train.CheckpointManager(tf.train.Checkpoint(model=finetuned.model), tmp, 1,
                             checkpoint_name=CHECKPOINT_NAME).save()
  os.replace(tmp, target)


def file_outputs(path: str, features, inputs) -> np.ndarray:
  predict = export_reader.load_model(path)
  parts = []
  for start in range(0, len(features["input_ids"]), _BATCH):
    out = predict({k: features[k][start:start + _BATCH] for k in inputs})
    parts.append(next(out[k] for k in ("score", "logits", "probabilities") if k in out))
  return np.concatenate(parts)


def agreement(a: np.ndarray, b: np.ndarray) -> Dict[str, float]:
  a, b = a.reshape(-1).astype(np.float64), b.reshape(-1).astype(np.float64)
  return {"correlation": float(np.corrcoef(a, b)[0, 1]),
          "max_abs_diff": float(np.abs(a - b).max())}


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--model-dir", required=True, help="a fine-tuned trial dir")
  parser.add_argument("--work-dir", required=True)
  parser.add_argument("--data-dir", default="", help="default: the run's")
  parser.add_argument("--epochs", type=float, default=1.0)
  parser.add_argument("--learning-rate", type=float, default=5e-5)
  parser.add_argument("--range-every", type=int, default=25,
                      help="steps between the ranges' recomputation")
  parser.add_argument("--timing-steps", type=int, default=8)
  parser.add_argument("--calibration-examples", type=int, default=256)
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args(argv)
  cli.check_flags(parser, args, epochs={"kind": float, "above": 0},
                  learning_rate={"kind": float, "above": 0}, range_every={"at_least": 1},
                  timing_steps={"at_least": 1}, calibration_examples={"at_least": 1},
                  seed={"at_least": 0, "at_most": 2 ** 32 - 1})
  return cli.run_command(lambda: run(args))


def run(args):
  log = lambda text: print(text, flush=True)
  work = args.work_dir
  os.makedirs(work, exist_ok=True)
  results_path = os.path.join(work, "results.json")
  results = (json.load(open(results_path, encoding="utf-8"))
             if os.path.isfile(results_path) else {})
  finetuned = load_finetuned(args.model_dir, note=log)
  if finetuned.family.name not in ("sentence", "tagging"):
    raise ValueError(f"{args.model_dir}: a {finetuned.family.name} model; this study "
                     "takes a sentence or tagging model")
  data_dir = args.data_dir or finetuned.settings["data_dir"]
  # The study's file is full int8 as first made: one int8 range per tensor, no outlier
  # channels apart (export/outlier_groups.py), which its fake quantization simulates.
  job = Job(finetuned, args.calibration_examples, data_dir, args.seed, outlier_channels=0)
  calibration = job.calibration
  inputs = list(job.deployable.inputs)
  dev_split = finetuned.task.eval_splits[0]
  dev_examples, dev = split_features(finetuned, dev_split, data_dir)
  quant = FakeQuant()

  # The sublayer forward against the model's own inference call.
  head = finetuned.runner.head_name
  own = finetuned.model({k: tf.constant(v[:_BATCH]) for k, v in dev.items()},
                        training=False)[head].numpy()
  ours = outputs_of(finetuned, quant, {k: v[:_BATCH] for k, v in dev.items()})
  results["forward_max_abs_diff"] = float(np.abs(own - ours).max())
  log(f"sublayer forward against the model's call: max |diff| "
      f"{results['forward_max_abs_diff']:.2e}")

  def save():
    with open(results_path, "w", encoding="utf-8") as f:
      json.dump(results, f, indent=1)

  scores = {}

  def score_files(name: str, model_dir: str, forms):
    """Exports `model_dir`'s LiteRT `forms` (tools.export's path) and scores them."""
    folder = os.path.join(work, f"{name}_export")
    if not os.path.isdir(folder):
      export(model_dir, folder, ["litert"] + ["litert_mixed_int8"] * ("mixed_int8" in forms),
             args.calibration_examples, data_dir, args.seed, log=log,
             variants={"litert": [f for f in forms if f in litert.FORMS]}, outlier_channels=0)
    for form in forms:
      path = os.path.join(folder, f"model_{form}.tflite")
      scores[f"{name} {form}"] = outputs = file_outputs(path, dev, inputs)
      results.setdefault("files", {})[f"{name} {form}"] = row = {
          **finetuned.runner.score(dev_examples, dev, outputs, dev_split),
          "as float": agreement(outputs, scores.get("float float32", outputs))["correlation"],
          "MiB": os.path.getsize(path) / 2 ** 20}
      log(f"{name} {form}: {row}")
    save()

  def score_graph(name: str):
    """The model's fake-quantized outputs on dev (ranges from its current weights),
    scored and against its full-int8 file: how well the simulation foresees the file."""
    observe_ranges(finetuned, quant, calibration)
    outputs = outputs_of(finetuned, quant, dev)
    results[f"{name} graph"] = row = {
        **finetuned.runner.score(dev_examples, dev, outputs, dev_split),
        "against its full_int8 file": agreement(outputs, scores[f"{name} full_int8"])}
    log(f"{name} graph: {row}")
    save()

  # In the issue's order: the float model's files first, then the lever.
  score_files("float", args.model_dir, FILE_FORMS)
  score_graph("float")
  qat_dir = os.path.join(work, "qat")
  if not os.path.isdir(qat_dir):
    _, features = split_features(finetuned, finetuned.task.train_split, data_dir)
    start = time.perf_counter()
    qat_speed, float_speed, steps = train(finetuned, quant, calibration, features, args, log)
    results["training"] = {"steps": steps, "seconds": time.perf_counter() - start,
                           "qat_steps_per_s": qat_speed, "float_steps_per_s": float_speed,
                           "learning_rate": args.learning_rate, "epochs": args.epochs,
                           "range_every": args.range_every}
    save_model_dir(finetuned, args.model_dir, qat_dir)
    save()
  else:
    finetuned = load_finetuned(qat_dir, note=log)
  # The QAT model's float32 and full int8 only (the lever is for full int8).
  score_files("qat", qat_dir, QAT_FORMS)
  score_graph("qat")
  print(json.dumps(results, indent=1))
  print(table(results))
  return 0


def table(results) -> str:
  """The dev metrics of every file and graph, as a Markdown table."""
  rows = {**results["files"], **{name: {k: v for k, v in scores.items()
                                        if not isinstance(v, dict)}
                                 for name, scores in results.items() if name.endswith("graph")}}
  metrics = [k for k in next(iter(rows.values())) if k not in ("as float", "MiB")]
  lines = ["| form | " + " | ".join(metrics) + " | as float | MiB |",
           "|---" * (len(metrics) + 3) + "|"]
  for name, scores in rows.items():
    cells = [f"{scores[k]:.2f}" for k in metrics]
    cells.append(f"{scores['as float']:.4f}" if "as float" in scores else "")
    cells.append(f"{scores['MiB']:.1f}" if "MiB" in scores else "")
    lines.append(f"| {name} | " + " | ".join(cells) + " |")
  return "\n".join(lines)


if __name__ == "__main__":
  sys.exit(main())
