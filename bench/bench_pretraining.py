"""Pre-training throughput: steps/s, tokens/s and peak memory of the real training step.

Runs the same compiled step as run_pretraining.py (pretrain/trainer.py's Pretrainer: its
model, optimizer and input pipeline, on TrainLoop.train_step) on random token ids,
after one untimed step (tracing), each configuration in its own process
(bench/child.py: peak RSS is per process). Prints one JSON line per run.

  python -m bench.bench_pretraining --model-size small --batch-size 128 --steps 5
  python -m bench.bench_pretraining --mixed-precision mixed_bfloat16 --use-xla  # GPU
  python -m bench.bench_pretraining --impl hf   # the PyTorch peer, same step
  python -m bench.bench_pretraining --impls ours,ours_unfused,hf --rounds 2 --threads 1 \
      --clock cpu  # alternating; the best of the rounds, ratios

--impl hf runs the same ELECTRA step built from Hugging Face transformers' PyTorch
ElectraForMaskedLM (generator) + ElectraForPreTraining (discriminator): shared
embeddings, the original's masking, generator logits at the masked positions only,
Gumbel sampling, loss = MLM + 50 x discriminator, AdamW and clipping at 1.0. It needs
torch and transformers, installed for the benchmark only:
pip install torch==2.13.0 transformers==5.23.0.
"""

import argparse
import json
import os
import tempfile

from bench import BERT_VOCAB, child
from bench.steps import CLOCKS, time_steps


def write_random_data(folder: str, seq_length: int, vocab_size: int, count: int = 512):
  import numpy as np  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from data_prep import records  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(0)
  path = os.path.join(folder, "pretrain_tfrecords",
                      records.FILE_PATTERN.format(index=0, count=1))
  os.makedirs(os.path.dirname(path))
  with tf.io.TFRecordWriter(path) as writer:
    for _ in range(count):
      ids = [101] + rng.integers(1000, vocab_size, seq_length - 2).tolist() + [102]
      feature = lambda v: tf.train.Feature(int64_list=tf.train.Int64List(value=v))
      writer.write(tf.train.Example(features=tf.train.Features(feature={
          "input_ids": feature(ids), "input_mask": feature([1] * seq_length),
          "segment_ids": feature([0] * seq_length)})).SerializeToString())


def run_ours(impl: str = "ours", model_size: str = "small", batch_size: int = 128,
             seq_length: int = 128, steps: int = 5, mixed_precision: str = "float32",
             use_xla: bool = False, vocab_file: str = BERT_VOCAB, recompute: bool = False,
             autodiff_gelu: bool = False, clock: str = "wall") -> dict:
  """Our step's figures: the Pretrainer of a config for these sizes, on random records."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from model.fused import use_fused  # pylint: disable=import-outside-toplevel
  from pretrain import trainer  # pylint: disable=import-outside-toplevel
  from pretrain.config import load_config  # pylint: disable=import-outside-toplevel
  if autodiff_gelu:
    import tf_keras  # pylint: disable=import-outside-toplevel
    from model import encoder  # pylint: disable=import-outside-toplevel
    encoder.gelu = tf_keras.activations.gelu

  with tempfile.TemporaryDirectory() as folder:
    with open(vocab_file, encoding="utf-8") as f:
      vocab = f.read()
    with open(os.path.join(folder, "vocab.txt"), "w", encoding="utf-8") as f:
      f.write(vocab)
    vocab_size = len(vocab.splitlines())
    write_random_data(folder, seq_length, vocab_size)
    config = load_config(f"electra_{model_size}", folder, {
        "model_size": model_size, "train_batch_size": batch_size,
        "max_seq_length": seq_length, "mixed_precision": mixed_precision,
        "use_xla": use_xla, "num_train_steps": steps + 1, "num_warmup_steps": 1,
        "vocab_size": vocab_size, "recompute": recompute})
    pretrainer = trainer.Pretrainer(config)
    if impl == "ours_unfused" or autodiff_gelu:
      use_fused(pretrainer.model, False)
    step = pretrainer.loop.train_step()
    iterator = pretrainer.loop.iterator(pretrainer.dataset_fn(training=True))
    seconds = time_steps(lambda: step(iterator)["loss"], steps, clock=clock)
  steps_per_s = steps / seconds
  gpu = tf.config.list_physical_devices("GPU")
  peak_gpu = tf.config.experimental.get_memory_info("GPU:0")["peak"] if gpu else 0
  return {
      "impl": impl, "model": f"electra_{model_size}", "batch": batch_size,
      "seq": seq_length, "precision": mixed_precision, "xla": use_xla,
      "recompute": recompute, "gelu": "autodiff" if autodiff_gelu else "custom",
      "device": "GPU" if gpu else "CPU", "steps_per_s": round(steps_per_s, 4),
      "tokens_per_s": round(steps_per_s * batch_size * seq_length),
      "peak_gpu_mib": round(peak_gpu / 2**20)}


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--model-size", default="small")
  parser.add_argument("--batch-size", type=int, default=128)
  parser.add_argument("--seq-length", type=int, default=128)
  parser.add_argument("--steps", type=int, default=5)
  parser.add_argument("--mixed-precision", default="float32")
  parser.add_argument("--use-xla", action="store_true")
  parser.add_argument("--vocab-file", default=BERT_VOCAB)
  parser.add_argument("--impl", default="ours", choices=("ours", "ours_unfused", "hf"),
                      help="ours_unfused: the transformer layer's elementwise work "
                      "unfused (model/fused.py off)")
  parser.add_argument("--impls", default=None,
                      help="comma-separated --impl values, each run in its own process, "
                      "alternating for --rounds rounds; then a table of the best of each")
  parser.add_argument("--rounds", type=int, default=1)
  parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                      help="wall: elapsed seconds; cpu: the process's CPU seconds (for "
                      "--threads 1 on a core that other jobs share)")
  parser.add_argument("--threads", type=int, default=0,
                      help="TensorFlow intra-op threads (one inter-op thread) and "
                      "torch.set_num_threads; 0: each framework's default")
  parser.add_argument("--recompute", action="store_true",
                      help="gradient checkpointing of the transformer layers")
  parser.add_argument("--autodiff-gelu", action="store_true",
                      help="the GELU before its custom gradient (autodiff of tf.nn.gelu), "
                      "to measure what that gradient saves (with the layer unfused: the "
                      "fused layer computes its own GELU)")
  child.add_arguments(parser)
  args = parser.parse_args()
  impls = args.impls.split(",") if args.impls else [args.impl]
  shared = {"model_size": args.model_size, "batch_size": args.batch_size,
            "seq_length": args.seq_length, "steps": args.steps, "clock": args.clock}
  ours = {**shared, "mixed_precision": args.mixed_precision, "use_xla": args.use_xla,
          "vocab_file": args.vocab_file, "recompute": args.recompute,
          "autodiff_gelu": args.autodiff_gelu}
  results = []
  for _ in range(args.rounds):
    for impl in impls:
      if impl == "hf":
        result = child.measure(run_hf, {**shared, "threads": args.threads}, args.threads,
                               args.isa)
      else:
        result = child.measure(run_ours, {**ours, "impl": impl}, args.threads, args.isa,
                               args.onednn)
      results.append(result)
      print(json.dumps(result), flush=True)
  if args.impls:
    compare(impls, results)


def run_hf(model_size: str, batch_size: int, seq_length: int, steps: int, threads: int,
           clock: str) -> dict:
  """The PyTorch peer: the same ELECTRA step with transformers' modules."""
  import torch  # pylint: disable=g-import-not-at-top
  if threads:
    torch.set_num_threads(threads)
  from transformers import (ElectraConfig, ElectraForMaskedLM,  # pylint: disable=g-import-not-at-top
                            ElectraForPreTraining)
  from model.config import ModelConfig  # pylint: disable=g-import-not-at-top
  disc = ModelConfig.from_size(model_size)
  gen = disc.generator_config()
  hf = lambda c: ElectraConfig(
      vocab_size=30522, embedding_size=c.embedding_width, hidden_size=c.hidden_size,
      num_hidden_layers=c.num_hidden_layers, num_attention_heads=c.num_attention_heads,
      intermediate_size=c.intermediate_size, hidden_act="gelu")
  generator = ElectraForMaskedLM(hf(gen)).train()
  discriminator = ElectraForPreTraining(hf(disc)).train()
  generator.electra.embeddings = discriminator.electra.embeddings  # shared, one copy
  generator.generator_lm_head.weight = discriminator.electra.embeddings.word_embeddings.weight
  params = {id(p): p for m in (generator, discriminator) for p in m.parameters()}
  optimizer = torch.optim.AdamW(list(params.values()), lr=5e-4, eps=1e-6,
                                weight_decay=0.01)
  batch, seq = batch_size, seq_length
  n_pred = int((0.15 + 0.005) * seq)
  rng = torch.Generator().manual_seed(0)
  ids = torch.randint(1000, 30522, (batch, seq), generator=rng)
  ids[:, 0], ids[:, -1] = 101, 102
  mask = torch.ones_like(ids)

  def step():
    candidates = ((ids != 101) & (ids != 102)).float()
    positions = torch.multinomial(candidates, n_pred, replacement=True, generator=rng)
    originals = torch.gather(ids, 1, positions)
    masked = ids.clone()
    keep = torch.rand(batch, n_pred, generator=rng) < 0.85
    masked.scatter_(1, torch.where(keep, positions, 0), 103)
    masked[:, 0] = 101
    hidden = generator.electra(input_ids=masked, attention_mask=mask).last_hidden_state
    picked = torch.gather(hidden, 1, positions[..., None].expand(-1, -1, hidden.shape[-1]))
    logits = generator.generator_lm_head(generator.generator_predictions(picked))
    mlm = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                            originals.reshape(-1))
    with torch.no_grad():
      u = torch.rand(logits.shape, generator=rng)
      sampled = (logits - torch.log(-torch.log(u + 1e-9) + 1e-9)).argmax(-1)
    corrupted = ids.clone()
    corrupted.scatter_(1, positions, sampled)
    labels = (corrupted != ids).float()
    disc_logits = discriminator(input_ids=corrupted, attention_mask=mask).logits
    disc = torch.nn.functional.binary_cross_entropy_with_logits(disc_logits, labels)
    loss = mlm + 50.0 * disc
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(list(params.values()), 1.0)
    optimizer.step()
    return loss

  steps_per_s = steps / time_steps(step, steps, clock=clock)
  return {"impl": "hf", "model": f"electra_{model_size}", "batch": batch, "seq": seq,
          "threads": torch.get_num_threads(), "steps_per_s": round(steps_per_s, 4),
          "tokens_per_s": round(steps_per_s * batch * seq)}


def compare(impls, results):
  """The best tokens/s of each of `impls` over the rounds, and its ratio to the last
  one's."""
  best = {impl: max((r for r in results if r["impl"] == impl),
                    key=lambda r: r["tokens_per_s"]) for impl in impls}
  peer = best[impls[-1]]["tokens_per_s"]
  isa = results[0]["isa"]
  print(f"CPU {isa}" + (" (emulated)" if isa != "native" else "") +
        f", ours' oneDNN {best[impls[0]]['onednn']}")
  for impl, r in best.items():
    print(f"| {impl} | {r['tokens_per_s']:,} tokens/s | {r['tokens_per_s'] / peer:.2f}x "
          f"{impls[-1]} | {r['peak_rss_mib']:,} MiB peak RSS |")
  print(json.dumps({impl: {"tokens_per_s": r["tokens_per_s"],
                           "peak_rss_mib": r["peak_rss_mib"]} for impl, r in best.items()}))


if __name__ == "__main__":
  main()
