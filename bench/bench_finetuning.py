"""Fine-tuning throughput: electra_small, seq 128, batch 32, ours vs Hugging Face PyTorch.

  python -m bench.bench_finetuning [--steps 30] [--warmup 5] [--rounds 2] [--layers]
      [--threads N] [--clock wall|cpu] [--model-size small]
  python -m bench.bench_finetuning --impls ours,hf --peers eager,compiled \
      --precisions float32,bfloat16   # the full comparison

Runs by hand, never in CI. Each implementation runs in its own process (bench/child.py,
so peak RSS is its own), alternating for --rounds rounds, on random token ids (speed
does not depend on the weights). Ours is the real training step of run_finetuning.py
for a 2-class GLUE task (bench/steps.py: Finetuner.train_loop's model, AdamW with
layer-wise learning rates, the task's loss, dropout; TrainLoop.train_step), timed after
--warmup steps (before 2026-11-23 the timing also held a second run's start-up: restore,
tracing, the final checkpoint and plot, which understated ours by about a quarter at 15
steps). The peer is transformers' ElectraForSequenceClassification with
torch.optim.AdamW and gradient clipping at 1.0, of the same config's sizes; it must be
installed for the benchmark only: pip install torch==2.13.0 transformers==5.23.0

Rows (bench/peers.py, as in bench_pretraining): --precisions runs each implementation in
float32 and/or bfloat16 (ours: mixed_bfloat16; the peer: CPU autocast), --peers the peer
eager and/or under torch.compile; a bare command runs the rows it ran before these
flags (float32, the eager peer). A row that cannot run here (bfloat16 on a CPU without
bfloat16 arithmetic, a failed compilation) is one line saying why. Every row that ran
reports its first step's seconds (first_step_s: ours' tracing, the compiled peer's
compilation; the other --warmup steps are untimed too) and its fraction of the peak
(peak_fraction; FLOPs per step: step_flops).
"""

import argparse
import json
import os
import tempfile

from bench import child, peers
from bench.steps import CLOCKS, finetuning_config, finetuning_step, time_first_and_steps

BATCH, SEQ, VOCAB = 32, 128, 30522
TASK = "glue/sst2"  # a 2-class GLUE task: the head of the peer's model too


def hparams_of(model_size: str, **more) -> dict:
  """The fine-tuning hyperparameters of the timed step, both sides'."""
  return {"model_size": model_size, "train_batch_size": BATCH, "max_seq_length": SEQ,
          **more}


def random_batch(np, seed=0):
  rng = np.random.default_rng(seed)
  ids = rng.integers(1000, VOCAB, (BATCH, SEQ)).astype(np.int32)
  return {"input_ids": ids, "input_mask": np.ones_like(ids),
          "segment_ids": np.zeros_like(ids), "label": rng.integers(0, 2, BATCH)}


def run_ours(impl: str, model_size: str, precision: str, steps: int, warmup: int,
             clock: str) -> dict:
  """first_step_s and the seconds of `steps` training steps of run_finetuning.py after
  `warmup` ones (the first among them), in `precision`."""
  import numpy as np
  from model.fused import use_fused
  batch = random_batch(np)
  batch["label"] = batch["label"].astype(np.float32)
  with tempfile.TemporaryDirectory() as folder:
    hparams = hparams_of(model_size, use_xla=impl == "ours_xla",
                         mixed_precision=peers.POLICIES[precision])
    loop, step = finetuning_step(TASK, batch, warmup + steps, hparams, folder)
    use_fused(loop.model, impl != "ours_unfused")
    first, seconds = time_first_and_steps(step, steps, warmup, clock)
  return {"first_step_s": round(first, 2), "seconds": seconds}


def run_hf(model_size: str, peer: str, precision: str, steps: int, warmup: int,
           clock: str) -> dict:
  """The peer's figures as run_ours' (bench/peers.py's time_peer: or why it did not
  run): transformers' classifier of the same sizes, `peer` in `precision`."""
  import numpy as np
  import torch
  from transformers import ElectraConfig, ElectraForSequenceClassification
  from model.weights.huggingface import config_json

  batch = {k: torch.from_numpy(v.astype(np.int64)) for k, v in random_batch(np).items()}
  sizes = finetuning_config(TASK, hparams_of(model_size)).model_config()
  model = ElectraForSequenceClassification(ElectraConfig(**config_json(
      sizes, "ElectraForSequenceClassification", num_labels=2))).train()
  optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, eps=1e-6,
                                weight_decay=0.01)
  wrap, forward = peers.torch_variant(peer, precision)
  runs = wrap(model)  # the same weights, as the peer runs them

  def step():
    with forward():
      out = runs(input_ids=batch["input_ids"], attention_mask=batch["input_mask"],
                 token_type_ids=batch["segment_ids"], labels=batch["label"])
    optimizer.zero_grad()
    out.loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return out.loss.detach()

  return peers.time_peer(step, steps, warmup, clock)


# One electra_small layer's matrix products as ours runs them in training: the dense ones
# as tf-models-official writes them (Einsum), the attention's two as model/fused.py does
# (tf.matmul over [batch, heads, length, size]; tf-models' einsum over [batch, length,
# heads, size], which inference runs, takes about 1.7x as long): name -> (einsum
# equation or tf.matmul's flags, operand shapes, count per layer); torch runs the same
# products as transformers does (Linear, then matmul over [batch, heads, seq, size]).
B, T, H, N, W, I = BATCH, SEQ, 256, 4, 64, 1024
PRODUCTS = {"query, key, value, output (256->256)": ("abc,cde->abde", [[B, T, H], [H, N, W]], 4),
            "intermediate (256->1024)": ("abc,cd->abd", [[B, T, H], [H, I]], 1),
            "output (1024->256)": ("abc,cd->abd", [[B, T, I], [I, H]], 1),
            "attention scores": ({"transpose_b": True}, [[B, N, T, W], [B, N, T, W]], 1),
            "attention context": ({}, [[B, N, T, T], [B, N, T, W]], 1)}
TORCH_PRODUCTS = {"query, key, value, output (256->256)": [[B * T, H], [H, H]],
                  "intermediate (256->1024)": [[B * T, H], [H, I]],
                  "output (1024->256)": [[B * T, I], [I, H]],
                  "attention scores": [[B, N, T, W], [B, N, W, T]],
                  "attention context": [[B, N, T, T], [B, N, T, W]]}


def best_ms(run, clock: str, repeats: int = 10) -> float:
  run()
  seconds = []
  for _ in range(repeats):
    start = CLOCKS[clock]()
    run()
    seconds.append(CLOCKS[clock]() - start)
  return 1000 * min(seconds)


def time_layer(framework: str, clock: str) -> dict:
  """Milliseconds, forward + backward (input and weight gradients), of one electra_small
  transformer layer (batch 32 x 128, training mode) with dropout 0.1 and 0 (TensorFlow:
  fused, model/fused.py, and unfused, tf-models-official's own call), and of its
  matrix products alone: where a step's time goes, layer by layer (a step is 12 layers,
  the embeddings, the head and the optimizer)."""
  ms = {}
  if framework == "tf":
    import tensorflow as tf
    from model.config import ModelConfig
    from model.encoder import ElectraEncoder
    from training.runtime import use_checkpointed_dropout
    use_checkpointed_dropout(0)  # as the scripts: the fused layer needs its generators

    def fwd_bwd(fn, args, variables=()):
      @tf.function
      def both():
        with tf.GradientTape() as tape:
          tape.watch(args)
          y = tf.reduce_sum(fn(*args))
        return tape.gradient(y, list(args) + list(variables))
      return lambda: [g.numpy() for g in both()]
    x, mask = tf.random.normal([B, T, H]), tf.ones([B, T, T])
    for fused in (True, False):
      for rate in (0.1, 0.0):
        config = ModelConfig.from_size("small", num_hidden_layers=1,
                                       hidden_dropout_prob=rate,
                                       attention_probs_dropout_prob=rate)
        layer = ElectraEncoder(config).transformer_layers[0]
        layer([x, mask])
        layer.fused = fused
        run = fwd_bwd(lambda x: layer([x, mask], training=True), [x],
                      layer.trainable_variables)
        ms[f"layer{'' if fused else ' unfused'}, dropout {rate}"] = best_ms(run, clock)
    for name, (form, shapes, count) in PRODUCTS.items():
      args = [tf.random.normal(shape) for shape in shapes]
      product = ((lambda a, b, form=form: tf.einsum(form, a, b)) if isinstance(form, str)
                 else (lambda a, b, form=form: tf.matmul(a, b, **form)))
      ms[name] = count * best_ms(fwd_bwd(product, args), clock)
  else:
    import torch
    from transformers import ElectraConfig
    from transformers.models.electra.modeling_electra import ElectraLayer

    def fwd_bwd(fn, args, parameters=()):
      def both():
        for tensor in list(args) + list(parameters):
          tensor.grad = None  # as the optimizer's zero_grad: no accumulation pass
        output = fn(*args)
        (output[0] if isinstance(output, tuple) else output).sum().backward()
      return both
    x = torch.randn(B, T, H, requires_grad=True)
    for rate in (0.1, 0.0):
      layer = ElectraLayer(ElectraConfig(
          hidden_size=H, num_attention_heads=N, intermediate_size=I,
          hidden_dropout_prob=rate, attention_probs_dropout_prob=rate)).train()
      ms[f"layer, dropout {rate}"] = best_ms(fwd_bwd(layer, [x], layer.parameters()),
                                             clock)
    for name, shapes in TORCH_PRODUCTS.items():
      args = [torch.randn(*shape, requires_grad=True) for shape in shapes]
      ms[name] = PRODUCTS[name][2] * best_ms(fwd_bwd(torch.matmul, args), clock)
  ms["matrix products, sum"] = sum(ms[name] for name in PRODUCTS)
  return ms


def run_impl(impl: str, steps: int, warmup: int, threads: int, clock: str,
             model_size: str = "small", peer: str = "eager",
             precision: str = "float32") -> dict:
  """One implementation's figures, in the process bench/child.py starts for it."""
  from util import cpu
  if impl in ("hf", "torch_layer"):
    import torch
    torch.set_num_threads(threads)
  if impl in ("tf_layer", "torch_layer"):
    return {"impl": impl, "ms": time_layer(impl.split("_")[0], clock)}
  if impl == "hf":
    timed = run_hf(model_size, peer, precision, steps, warmup, clock)
  else:
    timed = run_ours(impl, model_size, precision, steps, warmup, clock)
  if "unavailable" in timed:
    return {"impl": impl, **timed}
  return {"impl": impl, "examples_per_s": steps * BATCH / timed["seconds"],
          "steps_per_s": steps / timed["seconds"], **timed,
          "peak_flops": cpu.cpu_peak_flops(peers.POLICIES[precision], threads)}


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--steps", type=int, default=30)
  parser.add_argument("--warmup", type=int, default=5)
  parser.add_argument("--rounds", type=int, default=2)
  parser.add_argument("--model-size", default="small",
                      help="a size preset, configs/finetuning/<size>.json (--layers "
                      "times electra_small's layer whatever it is)")
  parser.add_argument("--impls", default="ours,ours_xla,hf",
                      help="of ours, ours_unfused (the transformer layer's elementwise "
                      "work unfused, model/fused.py off), ours_xla, hf")
  peers.add_arguments(parser)
  parser.add_argument("--layers", action="store_true",
                      help="also time one transformer layer and its matrix products, "
                      "forward and backward, in TensorFlow and torch")
  parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)),
                      help="threads of each implementation (TensorFlow's intra-op "
                      "and inter-op threads; torch.set_num_threads); default: the "
                      "cores this process may run on")
  parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                      help="wall: elapsed seconds; cpu: the process's CPU seconds (for "
                      "--threads 1 on a core that other jobs share)")
  child.add_arguments(parser)
  args = parser.parse_args()
  rows = {peers.row_label(impl, peer, precision): (impl, peer, precision)
          for precision in args.precisions for impl in args.impls.split(",")
          for peer in (args.peers if impl == "hf" else [None])}
  layer_children = ["tf_layer", "torch_layer"] if args.layers else []
  gpu = "bfloat16" in args.precisions and peers.ours_on_gpu()
  flops_per_step = step_flops(args.model_size)
  shared = {"steps": args.steps, "warmup": args.warmup, "threads": args.threads,
            "clock": args.clock, "model_size": args.model_size}
  results = {label: [] for label in list(rows) + layer_children}
  for round_ in range(args.rounds):
    for label, (impl, peer, precision) in rows.items():
      row = {"impl": impl, "peer": peer, "precision": precision}
      ours = impl.startswith("ours")
      result = peers.with_peak_fraction(peers.measure(
          run_impl, {**shared, **row}, row, ours and gpu, args.threads, args.isa,
          args.onednn if ours else "auto"), flops_per_step)
      results[label].append(result)
      figures = (result["unavailable"] if "unavailable" in result else
                 f"{result['examples_per_s']:8.1f} examples/s peak RSS "
                 f"{result['peak_rss_mib']:7.0f} MiB")
      print(f"round {round_ + 1} {label:22s} {figures}", flush=True)
    for impl in layer_children:
      result = child.measure(run_impl, {**shared, "impl": impl}, args.threads, args.isa,
                             args.onednn if impl == "tf_layer" else "auto")
      results[impl].append(result)
      print(f"round {round_ + 1} {impl:22s} " + ", ".join(
          f"{name} {ms:.1f} ms" for name, ms in result["ms"].items()), flush=True)
  print(f"\nelectra_{args.model_size} fine-tuning, batch {BATCH} x seq {SEQ}, "
        f"{args.threads} threads, {args.clock} clock, CPU {args.isa}" +
        (" (emulated)" if args.isa != "native" else "") + f", oneDNN {args.onednn}, "
        f"best of {args.rounds} rounds:")
  figures = {}
  for label in rows:
    best = max(results[label], key=lambda r: r.get("examples_per_s", 0))
    if "unavailable" in best:
      figures[label] = {"unavailable": best["unavailable"]}
    else:
      rate = best["examples_per_s"]
      figures[label] = {
          "examples_per_s": round(rate, 2), "step_ms": round(1000 * BATCH / rate),
          "peak_rss_mib": round(max(r["peak_rss_mib"] for r in results[label])),
          "gflop_per_s": round(rate * flops_per_step / BATCH / 1e9, 1),
          "first_step_s": best["first_step_s"],
          **{k: best[k] for k in ("peak_fraction",) if k in best}}
    print(peers.row_line(label, {**best, **figures[label]},
                         f"{figures[label].get('examples_per_s', 0):.1f} examples/s | "
                         f"{figures[label].get('step_ms')} ms/step | "
                         f"{figures[label].get('gflop_per_s')} GFLOP/s"))
  for impl in layer_children:
    mine = [r["ms"] for r in results[impl]]
    figures[impl] = {name: round(min(ms[name] for ms in mine), 1) for name in mine[0]}
    print(f"| {impl} | " + " | ".join(f"{name} {ms} ms"
                                      for name, ms in figures[impl].items()) + " |")
  print(json.dumps(figures))


def step_flops(model_size: str) -> float:
  """Training FLOPs of one step as the project counts them (model/flops.py, the
  original's convention: backward = forward, the embedding lookup as a one-hot matrix
  product), not what the hardware executes: the same for ours and the peer, which train
  the same model."""
  from model.flops import finetuning_flops_per_step
  return finetuning_flops_per_step(
      finetuning_config(TASK, hparams_of(model_size)).model_config(), SEQ, BATCH)


if __name__ == "__main__":
  main()
