"""Fine-tuning throughput: electra_small, seq 128, batch 32, ours vs Hugging Face PyTorch.

  python -m bench.bench_finetuning [--steps 30] [--warmup 5] [--rounds 2] [--layers]
      [--threads N] [--clock wall|cpu]

Runs by hand, never in CI. Each implementation runs in its own process (bench/child.py,
so peak RSS is its own), alternating for --rounds rounds, on random token ids (speed
does not depend on the weights). Ours is the real training step of run_finetuning.py
for a 2-class GLUE task (bench/steps.py: Finetuner.train_loop's model, AdamW with
layer-wise learning rates, the task's loss, dropout; TrainLoop.train_step), timed after
--warmup steps (before 2026-11-23 the timing also held a second run's start-up: restore,
tracing, the final checkpoint and plot, which understated ours by about a quarter at 15
steps). The peer is transformers' ElectraForSequenceClassification with
torch.optim.AdamW and gradient clipping at 1.0; it must be installed for the benchmark
only: pip install torch==2.13.0 transformers==5.23.0
"""

import argparse
import json
import os
import tempfile

from bench import child
from bench.steps import CLOCKS, finetuning_step, time_steps

BATCH, SEQ, VOCAB = 32, 128, 30522


def random_batch(np, seed=0):
  rng = np.random.default_rng(seed)
  ids = rng.integers(1000, VOCAB, (BATCH, SEQ)).astype(np.int32)
  return {"input_ids": ids, "input_mask": np.ones_like(ids),
          "segment_ids": np.zeros_like(ids), "label": rng.integers(0, 2, BATCH)}


def run_ours(impl: str, steps: int, warmup: int, clock: str) -> float:
  """Seconds of `steps` training steps of run_finetuning.py after `warmup` ones."""
  import numpy as np
  from model.fused import use_fused
  batch = random_batch(np)
  batch["label"] = batch["label"].astype(np.float32)
  with tempfile.TemporaryDirectory() as folder:
    hparams = {"model_size": "small", "train_batch_size": BATCH, "max_seq_length": SEQ,
               "use_xla": impl == "ours_xla",
               "mixed_precision": "mixed_bfloat16" if impl == "ours_bf16" else "float32"}
    loop, step = finetuning_step("glue/sst2", batch, warmup + steps, hparams, folder)
    use_fused(loop.model, impl != "ours_unfused")
    return time_steps(step, steps, warmup, clock)


def run_hf(steps: int, warmup: int, clock: str) -> float:
  import numpy as np
  import torch
  from transformers import ElectraConfig, ElectraForSequenceClassification

  batch = {k: torch.from_numpy(v.astype(np.int64)) for k, v in random_batch(np).items()}
  config = ElectraConfig(vocab_size=VOCAB, embedding_size=128, hidden_size=256,
                         num_hidden_layers=12, num_attention_heads=4,
                         intermediate_size=1024, num_labels=2)
  model = ElectraForSequenceClassification(config).train()
  optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, eps=1e-6,
                                weight_decay=0.01)

  def step():
    out = model(input_ids=batch["input_ids"], attention_mask=batch["input_mask"],
                token_type_ids=batch["segment_ids"], labels=batch["label"])
    optimizer.zero_grad()
    out.loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return out.loss

  return time_steps(step, steps, warmup, clock)


# One electra_small layer's matrix products, as tf-models-official writes them (Einsum):
# name -> (equation, operand shapes, count per layer); torch runs the same products as
# transformers does (Linear, then matmul over [batch, heads, seq, size]).
B, T, H, N, W, I = BATCH, SEQ, 256, 4, 64, 1024
PRODUCTS = {"query, key, value, output (256->256)": ("abc,cde->abde", [[B, T, H], [H, N, W]], 4),
            "intermediate (256->1024)": ("abc,cd->abd", [[B, T, H], [H, I]], 1),
            "output (1024->256)": ("abc,cd->abd", [[B, T, I], [I, H]], 1),
            "attention scores": ("aecd,abcd->acbe", [[B, T, N, W], [B, T, N, W]], 1),
            "attention context": ("acbe,aecd->abcd", [[B, N, T, T], [B, T, N, W]], 1)}
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
    for name, (equation, shapes, count) in PRODUCTS.items():
      args = [tf.random.normal(shape) for shape in shapes]
      ms[name] = count * best_ms(fwd_bwd(lambda a, b: tf.einsum(equation, a, b), args),
                                 clock)
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


def run_impl(impl: str, steps: int, warmup: int, threads: int, clock: str) -> dict:
  """One implementation's figures, in the process bench/child.py starts for it."""
  if impl in ("hf", "torch_layer"):
    import torch
    torch.set_num_threads(threads)
  if impl in ("tf_layer", "torch_layer"):
    return {"impl": impl, "ms": time_layer(impl.split("_")[0], clock)}
  run = run_hf if impl == "hf" else lambda *a: run_ours(impl, *a)
  seconds = run(steps, warmup, clock)
  return {"impl": impl, "examples_per_s": steps * BATCH / seconds, "seconds": seconds}


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--steps", type=int, default=30)
  parser.add_argument("--warmup", type=int, default=5)
  parser.add_argument("--rounds", type=int, default=2)
  parser.add_argument("--impls", default="ours,ours_xla,hf",
                      help="of ours, ours_unfused (the transformer layer's elementwise "
                      "work unfused, model/fused.py off), ours_xla, ours_bf16 "
                      "(mixed_bfloat16), hf")
  parser.add_argument("--layers", action="store_true",
                      help="also time one transformer layer and its matrix products, "
                      "forward and backward, in TensorFlow and torch")
  parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)),
                      help="threads of each implementation (TensorFlow's intra-op "
                      "threads, one inter-op thread; torch.set_num_threads); default: the "
                      "cores this process may run on")
  parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                      help="wall: elapsed seconds; cpu: the process's CPU seconds (for "
                      "--threads 1 on a core that other jobs share)")
  child.add_arguments(parser)
  args = parser.parse_args()
  impls = args.impls.split(",")
  layer_children = ["tf_layer", "torch_layer"] if args.layers else []
  results = []
  for round_ in range(args.rounds):
    for impl in impls + layer_children:
      result = child.measure(run_impl, {"impl": impl, "steps": args.steps,
                                        "warmup": args.warmup, "threads": args.threads,
                                        "clock": args.clock}, threads=args.threads,
                             isa=args.isa,
                             onednn=args.onednn if impl.startswith(("ours", "tf")) else "auto")
      results.append(result)
      if impl in layer_children:
        print(f"round {round_ + 1} {impl:13s} " + ", ".join(
            f"{name} {ms:.1f} ms" for name, ms in result["ms"].items()), flush=True)
      else:
        print(f"round {round_ + 1} {impl:13s} {result['examples_per_s']:8.1f} examples/s "
              f"peak RSS {result['peak_rss_mib']:7.0f} MiB", flush=True)
  print(f"\nelectra_small fine-tuning, batch {BATCH} x seq {SEQ}, {args.threads} threads, "
        f"{args.clock} clock, CPU {args.isa}" + (" (emulated)" if args.isa != "native" else "")
        + f", oneDNN {args.onednn}, "
        f"best of {args.rounds} rounds:")
  figures = {}
  flops_per_example = step_flops() / BATCH
  for impl in impls:
    mine = [r for r in results if r["impl"] == impl]
    best = max(r["examples_per_s"] for r in mine)
    figures[impl] = {"examples_per_s": round(best, 2), "step_ms": round(1000 * BATCH / best),
                     "peak_rss_mib": round(max(r["peak_rss_mib"] for r in mine)),
                     "gflop_per_s": round(best * flops_per_example / 1e9, 1)}
    print(f"| {impl} | {figures[impl]['examples_per_s']:.1f} examples/s | "
          f"{figures[impl]['step_ms']} ms/step | {figures[impl]['gflop_per_s']} GFLOP/s | "
          f"{figures[impl]['peak_rss_mib']} MiB peak RSS |")
  for impl in layer_children:
    mine = [r["ms"] for r in results if r["impl"] == impl]
    figures[impl] = {name: round(min(ms[name] for ms in mine), 1) for name in mine[0]}
    print(f"| {impl} | " + " | ".join(f"{name} {ms} ms"
                                      for name, ms in figures[impl].items()) + " |")
  print(json.dumps(figures))


def step_flops() -> float:
  """Training FLOPs of one step as the project counts them (model/flops.py, the
  original's convention: backward = forward, the embedding lookup as a one-hot matrix
  product), not what the hardware executes."""
  from model.config import ModelConfig
  from model.flops import finetuning_flops_per_step
  return finetuning_flops_per_step(ModelConfig.from_size("small"), SEQ, BATCH)


if __name__ == "__main__":
  main()
