"""Pre-training throughput: steps/s, tokens/s and peak memory of the real training step.

Runs the same compiled step as run_pretraining.py (training/loop.py's TrainLoop with the
pretrain/objective.py model and training/optimization.py optimizer) on random token ids,
after one untimed step (tracing). Prints one JSON line per configuration.

  python bench/bench_pretraining.py --model-size small --batch-size 128 --steps 5
  python bench/bench_pretraining.py --mixed-precision mixed_bfloat16 --use-xla  # GPU
  python bench/bench_pretraining.py --impl hf   # the PyTorch peer, same step
  python bench/bench_pretraining.py --impls ours,ours_unfused,hf --rounds 2 --threads 1 \
      --clock cpu  # each in its own process, alternating; the best of the rounds, ratios

--impl hf runs the same ELECTRA step built from Hugging Face transformers' PyTorch
ElectraForMaskedLM (generator) + ElectraForPreTraining (discriminator): shared
embeddings, the original's masking, generator logits at the masked positions only,
Gumbel sampling, loss = MLM + 50 x discriminator, AdamW and clipping at 1.0. It needs
torch and transformers, installed for the benchmark only:
pip install torch==2.13.0 transformers==5.23.0. Run each --impl in its own process (peak
RSS is per process).
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position
import tensorflow as tf  # pylint: disable=g-import-not-at-top,wrong-import-position
import tf_keras  # pylint: disable=g-import-not-at-top,wrong-import-position

from data_prep import records  # pylint: disable=wrong-import-position
from model.fused import use_fused  # pylint: disable=wrong-import-position
from pretrain import trainer  # pylint: disable=wrong-import-position
from pretrain.config import load_config  # pylint: disable=wrong-import-position

CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
VOCAB = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..",
                     "shared", "data", "vocab", "bert_uncased_vocab.txt")


def write_random_data(folder: str, seq_length: int, vocab_size: int, count: int = 512):
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


def peak_gpu_bytes() -> int:
  if not tf.config.list_physical_devices("GPU"):
    return 0
  return tf.config.experimental.get_memory_info("GPU:0")["peak"]


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--model-size", default="small")
  parser.add_argument("--batch-size", type=int, default=128)
  parser.add_argument("--seq-length", type=int, default=128)
  parser.add_argument("--steps", type=int, default=5)
  parser.add_argument("--mixed-precision", default="float32")
  parser.add_argument("--use-xla", action="store_true")
  parser.add_argument("--vocab-file", default=VOCAB)
  parser.add_argument("--impl", default="ours", choices=("ours", "ours_unfused", "hf"),
                      help="ours_unfused: the transformer layer's elementwise work "
                      "unfused (model/fused.py off), as before issue 22")
  parser.add_argument("--impls", default=None,
                      help="comma-separated --impl values, each run in its own process, "
                      "alternating for --rounds rounds")
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
  args = parser.parse_args()
  if args.impls:
    return alternate(args)
  if args.impl == "hf":
    return run_hf(args)
  if args.autodiff_gelu:
    from model import encoder  # pylint: disable=g-import-not-at-top
    encoder.gelu = tf_keras.activations.gelu

  with tempfile.TemporaryDirectory() as folder:
    with open(args.vocab_file, encoding="utf-8") as f:
      vocab_size = sum(1 for _ in f)
    with open(os.path.join(folder, "vocab.txt"), "w", encoding="utf-8") as f:
      f.write(open(args.vocab_file, encoding="utf-8").read())
    write_random_data(folder, args.seq_length, vocab_size)
    config = load_config(f"electra_{args.model_size}", folder, {
        "model_size": args.model_size, "train_batch_size": args.batch_size,
        "max_seq_length": args.seq_length, "mixed_precision": args.mixed_precision,
        "use_xla": args.use_xla, "num_train_steps": args.steps + 1,
        "num_warmup_steps": 1, "vocab_size": vocab_size, "recompute": args.recompute})
    pretrainer = trainer.Pretrainer(config)
    loop = pretrainer.loop
    if args.impl == "ours_unfused" or args.autodiff_gelu:
      use_fused(pretrainer.model, False)
    # The loop's own step function, timed without checkpoints or logs.
    step_fn = loop._build_step(distributed=False)  # pylint: disable=protected-access
    iterator = iter(pretrainer._dataset_fn(  # pylint: disable=protected-access
        args.batch_size, training_data=True)(loop.input_context()))
    float(step_fn(iterator)["loss"])  # tracing and the first step
    start = CLOCKS[args.clock]()
    for _ in range(args.steps):
      loss = step_fn(iterator)["loss"]
    float(loss)
    elapsed = CLOCKS[args.clock]() - start
  steps_per_s = args.steps / elapsed
  print(json.dumps({
      "impl": args.impl, "model": f"electra_{args.model_size}", "batch": args.batch_size,
      "seq": args.seq_length, "precision": args.mixed_precision, "xla": args.use_xla,
      "recompute": args.recompute, "gelu": "autodiff" if args.autodiff_gelu else "custom",
      "device": "GPU" if tf.config.list_physical_devices("GPU") else "CPU",
      "steps_per_s": round(steps_per_s, 4),
      "tokens_per_s": round(steps_per_s * args.batch_size * args.seq_length),
      "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
      "peak_gpu_mib": round(peak_gpu_bytes() / 2**20)}))


def run_hf(args):
  """The PyTorch peer: the same ELECTRA step with transformers' modules."""
  import torch  # pylint: disable=g-import-not-at-top
  if args.threads:
    torch.set_num_threads(args.threads)
  from transformers import (ElectraConfig, ElectraForMaskedLM,  # pylint: disable=g-import-not-at-top
                            ElectraForPreTraining)
  from model.config import ModelConfig  # pylint: disable=g-import-not-at-top
  disc = ModelConfig.from_size(args.model_size)
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
  batch, seq = args.batch_size, args.seq_length
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
    return float(loss)

  step()
  start = CLOCKS[args.clock]()
  for _ in range(args.steps):
    step()
  elapsed = CLOCKS[args.clock]() - start
  steps_per_s = args.steps / elapsed
  print(json.dumps({
      "model": f"electra_{args.model_size}", "impl": "hf-pytorch", "batch": batch,
      "seq": seq, "threads": torch.get_num_threads(), "steps_per_s": round(steps_per_s, 4),
      "tokens_per_s": round(steps_per_s * batch * seq),
      "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}))


def alternate(args):
  """Each of --impls in its own process (peak RSS is per process), alternating for
  --rounds rounds; prints each run, then the best tokens/s of each and its ratio to the
  last impl's."""
  impls = args.impls.split(",")
  env = dict(os.environ)
  if args.threads:
    env.update(TF_NUM_INTRAOP_THREADS=str(args.threads), TF_NUM_INTEROP_THREADS="1")
  passed = [f"--{name.replace('_', '-')}={value}" for name, value in vars(args).items()
            if name in ("model_size", "batch_size", "seq_length", "steps",
                        "mixed_precision", "vocab_file", "threads", "clock")]
  results = []
  for round_ in range(args.rounds):
    for impl in impls:
      out = subprocess.run([sys.executable, __file__, "--impl", impl, *passed],
                           capture_output=True, text=True, env=env, check=True)
      results.append(json.loads(out.stdout.strip().splitlines()[-1]))
      results[-1]["impl"] = impl
      print(f"round {round_ + 1} {impl:13s} {results[-1]['tokens_per_s']:7d} tokens/s "
            f"peak RSS {results[-1]['peak_rss_mib']:6d} MiB", flush=True)
  best = {impl: max((r for r in results if r["impl"] == impl),
                    key=lambda r: r["tokens_per_s"]) for impl in impls}
  peer = best[impls[-1]]["tokens_per_s"]
  for impl, r in best.items():
    print(f"| {impl} | {r['tokens_per_s']:,} tokens/s | {r['tokens_per_s'] / peer:.2f}x "
          f"{impls[-1]} | {r['peak_rss_mib']:,} MiB peak RSS |")
  print(json.dumps({impl: {"tokens_per_s": r["tokens_per_s"],
                           "peak_rss_mib": r["peak_rss_mib"]} for impl, r in best.items()}))


if __name__ == "__main__":
  main()
