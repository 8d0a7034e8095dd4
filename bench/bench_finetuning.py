"""Fine-tuning throughput: electra_small, seq 128, batch 32, ours vs Hugging Face PyTorch.

  python bench/bench_finetuning.py [--steps 30] [--warmup 5] [--rounds 2] [--layers]
      [--threads N] [--clock wall|cpu]

Runs by hand, never in CI. Each implementation runs in its own subprocess (so peak RSS
is its own), alternating for --rounds rounds, on random token ids (speed does not depend
on the weights). Ours is the real training step of run_finetuning.py: the shared
TrainLoop's compiled step with the AdamW optimizer, layer-wise learning rates, dropout
and a classification head, called directly and timed after --warmup steps (before
2026-11-23 the timing also held a second run's start-up: restore, tracing, the final
checkpoint and plot, which understated ours by about a quarter at 15 steps). The peer is transformers' ElectraForSequenceClassification with
torch.optim.AdamW and gradient clipping at 1.0; it must be installed for the benchmark
only: pip install torch==2.13.0 transformers==5.23.0
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLOCKS = {"wall": time.perf_counter,
          # The process's own CPU seconds: with --threads 1 on a core other jobs share,
          # the time the step computed, without the time it waited for the core.
          "cpu": time.process_time}
clock = CLOCKS["wall"]
BATCH, SEQ, VOCAB = 32, 128, 30522


def random_batch(np, seed=0):
  rng = np.random.default_rng(seed)
  ids = rng.integers(1000, VOCAB, (BATCH, SEQ)).astype(np.int32)
  return {"input_ids": ids, "input_mask": np.ones_like(ids),
          "segment_ids": np.zeros_like(ids), "label": rng.integers(0, 2, BATCH)}


def run_ours(steps: int, warmup: int, xla: bool, precision: str = "float32",
             fused: bool = True) -> float:
  sys.path.insert(0, ROOT)
  import numpy as np
  import tensorflow as tf
  from finetune.modeling import FinetuningModel
  from finetune.sentence.head import SentenceHead
  from model.config import ModelConfig
  from model.fused import use_fused
  from training.loop import LoopSettings, TrainLoop
  from training.optimization import create_optimizer
  from training.runtime import set_precision, use_checkpointed_dropout

  set_precision(precision)
  use_checkpointed_dropout(0)  # as run_finetuning.py: dropout from checkpointed generators
  batch = random_batch(np)
  batch["label"] = batch["label"].astype(np.float32)
  model = FinetuningModel(ModelConfig.from_size("small"), {"task": SentenceHead(2)})
  model.build_variables(seq_length=SEQ)
  optimizer = create_optimizer(3e-4, 10000, 1000, 0.01,
                               lr_multiplier=model.lr_multiplier(0.8))
  use_fused(model, fused)

  def loss_fn(features, step, replica_id, micro_step):
    logits = model(features, training=True)["task"]
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        tf.cast(features["label"], tf.int32), logits))
    return loss * BATCH, {}

  with tempfile.TemporaryDirectory() as model_dir:
    settings = LoopSettings(model_dir=model_dir, num_train_steps=warmup + steps,
                            use_xla=xla)
    loop = TrainLoop(tf.distribute.get_strategy(), model, optimizer, loss_fn, settings)
    # The loop's own step function, timed without its start-up (restore, tracing),
    # checkpoints, logs or curves, as the peer's loop is.
    step_fn = loop._build_step(distributed=False)  # pylint: disable=protected-access
    iterator = iter(tf.data.Dataset.from_tensors(batch).repeat())
    for _ in range(warmup):
      float(step_fn(iterator)["loss"])
    start = clock()
    for _ in range(steps):
      loss = step_fn(iterator)["loss"]
    float(loss)
    return clock() - start


def run_hf(steps: int, warmup: int) -> float:
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

  for _ in range(warmup):
    step()
  start = clock()
  for _ in range(steps):
    step()
  return clock() - start


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


def best_ms(run, repeats: int = 10) -> float:
  run()
  seconds = []
  for _ in range(repeats):
    start = clock()
    run()
    seconds.append(clock() - start)
  return 1000 * min(seconds)


def time_layer(framework: str) -> dict:
  """Milliseconds, forward + backward (input and weight gradients), of one electra_small
  transformer layer (batch 32 x 128, training mode) with dropout 0.1 and 0 (TensorFlow:
  fused, model/fused.py, and unfused, tf-models-official's own call), and of its
  matrix products alone: where a step's time goes, layer by layer (a step is 12 layers,
  the embeddings, the head and the optimizer)."""
  ms = {}
  if framework == "tf":
    import tensorflow as tf
    sys.path.insert(0, ROOT)
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
        ms[f"layer{'' if fused else ' unfused'}, dropout {rate}"] = best_ms(fwd_bwd(
            lambda x: layer([x, mask], training=True), [x], layer.trainable_variables))
    for name, (equation, shapes, count) in PRODUCTS.items():
      args = [tf.random.normal(shape) for shape in shapes]
      ms[name] = count * best_ms(fwd_bwd(lambda a, b: tf.einsum(equation, a, b), args))
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
      ms[f"layer, dropout {rate}"] = best_ms(fwd_bwd(layer, [x], layer.parameters()))
    for name, shapes in TORCH_PRODUCTS.items():
      args = [torch.randn(*shape, requires_grad=True) for shape in shapes]
      ms[name] = PRODUCTS[name][2] * best_ms(fwd_bwd(torch.matmul, args))
  ms["matrix products, sum"] = sum(ms[name] for name in PRODUCTS)
  return ms


def child(impl: str, steps: int, warmup: int, threads: int, clock_name: str):
  global clock
  clock = CLOCKS[clock_name]
  if impl in ("hf", "torch_layer"):
    import torch
    torch.set_num_threads(threads)
  if impl in ("tf_layer", "torch_layer"):
    print(json.dumps({"impl": impl, "ms": time_layer(impl.split("_")[0])}))
    return
  if impl == "hf":
    seconds = run_hf(steps, warmup)
  else:
    seconds = run_ours(steps, warmup, impl == "ours_xla",
                       "mixed_bfloat16" if impl == "ours_bf16" else "float32",
                       fused=impl != "ours_unfused")
  peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
  print(json.dumps({"impl": impl, "examples_per_s": steps * BATCH / seconds,
                    "seconds": seconds, "peak_rss_mib": peak_mib}))


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--steps", type=int, default=30)
  parser.add_argument("--warmup", type=int, default=5)
  parser.add_argument("--rounds", type=int, default=2)
  parser.add_argument("--impls", default="ours,ours_xla,hf",
                      help="of ours, ours_unfused (the transformer layer's elementwise "
                      "work unfused, as before issue 22), ours_xla, ours_bf16 "
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
  parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.child:
    return child(args.child, args.steps, args.warmup, args.threads, args.clock)
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3",
         "TF_NUM_INTRAOP_THREADS": str(args.threads), "TF_NUM_INTEROP_THREADS": "1"}
  impls = args.impls.split(",")
  layer_children = ["tf_layer", "torch_layer"] if args.layers else []
  results = []
  for round_ in range(args.rounds):
    for impl in impls + layer_children:
      out = subprocess.run([sys.executable, __file__, "--child", impl, "--steps",
                            str(args.steps), "--warmup", str(args.warmup),
                            "--threads", str(args.threads), "--clock", args.clock],
                           capture_output=True, text=True, env=env, check=True)
      result = json.loads(out.stdout.strip().splitlines()[-1])
      results.append(result)
      if impl in layer_children:
        print(f"round {round_ + 1} {impl:13s} " + ", ".join(
            f"{name} {ms:.1f} ms" for name, ms in result["ms"].items()), flush=True)
      else:
        print(f"round {round_ + 1} {impl:13s} {result['examples_per_s']:8.1f} examples/s "
              f"peak RSS {result['peak_rss_mib']:7.0f} MiB", flush=True)
  print(f"\nelectra_small fine-tuning, batch {BATCH} x seq {SEQ}, {args.threads} threads, "
        f"{args.clock} clock, "
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
  sys.path.insert(0, ROOT)
  from model.config import ModelConfig
  from model.flops import finetuning_flops_per_step
  return finetuning_flops_per_step(ModelConfig.from_size("small"), SEQ, BATCH)


if __name__ == "__main__":
  main()
