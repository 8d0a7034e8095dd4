"""Pre-training throughput: steps/s, tokens/s and peak memory of the real training step.

Runs the same compiled step as run_pretraining.py (pretrain/trainer.py's Pretrainer: its
model, optimizer and input pipeline, on TrainLoop.train_step) on random token ids,
after one untimed step (tracing), each configuration in its own process
(bench/child.py: peak RSS is per process). Prints one JSON line per run.

  python -m bench.bench_pretraining --model-size small --batch-size 128 --steps 5
  python -m bench.bench_pretraining --precisions bfloat16 --use-xla  # GPU
  python -m bench.bench_pretraining --impl hf   # the PyTorch peer, same step
  python -m bench.bench_pretraining --impls ours,ours_unfused,hf --rounds 2 --threads 1 \
      --clock cpu  # alternating; the best of the rounds, ratios
  python -m bench.bench_pretraining --impls ours,hf --peers eager,compiled \
      --precisions float32,bfloat16 --rounds 3   # the full comparison

--impl hf runs the same ELECTRA step built from Hugging Face transformers' PyTorch
ElectraForMaskedLM (generator) + ElectraForPreTraining (discriminator) of the config's
sizes: shared embeddings, the original's masking, generator logits at the masked
positions only, Gumbel sampling, loss = MLM + disc_weight x discriminator, fused AdamW and
clipping at 1.0. It needs torch and transformers, installed for the benchmark only:
pip install torch==2.13.0 transformers==5.23.0.

Rows (bench/peers.py): --precisions runs each implementation in float32 and/or
bfloat16 (ours: mixed_bfloat16; the peer: CPU autocast), --peers the peer eager and/or
under torch.compile; a bare command runs the rows it ran before these flags (the eager
peer, float32). A row that cannot run here (bfloat16 on a CPU without bfloat16
arithmetic, a failed compilation) is one line saying why. Every row that ran also
reports its first step's seconds (first_step_s) and its fraction of the peak
(peak_fraction, from the config's FLOPs per step, tools/flops.py's count). The table
labels rows "ours", "hf", "hf compiled", with " bfloat16" for bfloat16 rows, and gives
each row's speed over the last --impls entry's (its first --peers entry's) in the same
precision.
"""

import argparse
import json
import os
import sys
import tempfile

from bench import BERT_VOCAB, check_files, child, choice_list, peers
from bench.steps import CLOCKS, time_first_and_steps
from util import cli

IMPLS = ("ours", "ours_unfused", "hf")


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


def bench_config(model_size: str, batch_size: int, seq_length: int, steps: int,
                 vocab_file: str, folder: str = "", **overrides):
  """The pre-training config both sides' steps follow (sizes, vocab_file's vocabulary,
  masking, loss weights), for `steps` timed steps after one."""
  from pretrain.config import load_config  # pylint: disable=import-outside-toplevel
  return load_config(f"electra_{model_size}", folder, {
      "model_size": model_size, "train_batch_size": batch_size,
      "max_seq_length": seq_length, "num_train_steps": steps + 1,
      "num_warmup_steps": 1, "vocab_file": vocab_file, **overrides})


def step_flops(model_size: str, batch_size: int, seq_length: int,
               vocab_file: str) -> float:
  """Training FLOPs of one step of bench_config's model, as the trainer counts them."""
  from pretrain.objectives import objective_for  # pylint: disable=import-outside-toplevel
  return objective_for(bench_config(model_size, batch_size, seq_length, 1, vocab_file)
                       ).flops().train_flops_per_step


def run_ours(impl: str = "ours", model_size: str = "small", batch_size: int = 128,
             seq_length: int = 128, steps: int = 5, mixed_precision: str = "float32",
             use_xla: bool = False, vocab_file: str = BERT_VOCAB, recompute: bool = False,
             autodiff_gelu: bool = False, clock: str = "wall", threads: int = 0) -> dict:
  """Our step's figures: the Pretrainer of a config for these sizes, on random records."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from model.fused import use_fused  # pylint: disable=import-outside-toplevel
  from pretrain import trainer  # pylint: disable=import-outside-toplevel
  from training import runtime  # pylint: disable=import-outside-toplevel
  from util import cpu  # pylint: disable=import-outside-toplevel
  if autodiff_gelu:
    import tf_keras  # pylint: disable=import-outside-toplevel
    from model import encoder  # pylint: disable=import-outside-toplevel
    encoder.gelu = tf_keras.activations.gelu

  with tempfile.TemporaryDirectory() as folder:
    with open(vocab_file, encoding="utf-8") as f:
      vocab = f.read()
    with open(os.path.join(folder, "vocab.txt"), "w", encoding="utf-8") as f:
      f.write(vocab)
    write_random_data(folder, seq_length, len(vocab.splitlines()))
    config = bench_config(model_size, batch_size, seq_length, steps,
                          os.path.join(folder, "vocab.txt"), folder,
                          mixed_precision=mixed_precision, use_xla=use_xla,
                          recompute=recompute)
    pretrainer = trainer.Pretrainer(config)
    if impl == "ours_unfused" or autodiff_gelu:
      use_fused(pretrainer.model, False)
    step = pretrainer.loop.train_step
    iterator = step.iterator(pretrainer.dataset_fn(training=True))
    first, seconds = time_first_and_steps(lambda: step(iterator)["loss"], steps,
                                          clock=clock)
  steps_per_s = steps / seconds
  gpu = tf.config.list_physical_devices("GPU")
  peak_gpu = tf.config.experimental.get_memory_info("GPU:0")["peak"] if gpu else 0
  return {
      "impl": impl, "model": f"electra_{model_size}", "batch": batch_size,
      "seq": seq_length, "precision": mixed_precision, "xla": use_xla,
      "recompute": recompute, "gelu": "autodiff" if autodiff_gelu else "custom",
      "device": "GPU" if gpu else "CPU", "steps_per_s": round(steps_per_s, 4),
      "tokens_per_s": round(steps_per_s * batch_size * seq_length),
      "first_step_s": round(first, 2),
      "peak_flops": (runtime.peak_flops(pretrainer.strategy, mixed_precision) if gpu
                     else cpu.cpu_peak_flops(mixed_precision, threads)),
      "peak_gpu_mib": round(peak_gpu / 2**20)}


def parse_args(argv=None) -> argparse.Namespace:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--model-size", default="small")
  parser.add_argument("--batch-size", type=int, default=128)
  parser.add_argument("--seq-length", type=int, default=128)
  parser.add_argument("--steps", type=int, default=5)
  parser.add_argument("--use-xla", action="store_true")
  parser.add_argument("--vocab-file", default=BERT_VOCAB)
  parser.add_argument("--impl", default="ours", choices=IMPLS,
                      help="ours_unfused: the transformer layer's elementwise work "
                      "unfused (model/fused.py off)")
  parser.add_argument("--impls", type=choice_list(IMPLS), default=None,
                      help="comma-separated --impl values, each run in its own process, "
                      "alternating for --rounds rounds; then a table of the best of each")
  peers.add_arguments(parser)
  parser.add_argument("--rounds", type=int, default=1)
  parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                      help="wall: elapsed seconds; cpu: the process's CPU seconds (for "
                      "--threads 1 on a core that other jobs share)")
  parser.add_argument("--threads", type=int, default=0,
                      help="TensorFlow intra-op and inter-op threads, and "
                      "torch.set_num_threads; 0: each framework's default")
  parser.add_argument("--recompute", action="store_true",
                      help="gradient checkpointing of the transformer layers")
  parser.add_argument("--autodiff-gelu", action="store_true",
                      help="the GELU before its custom gradient (autodiff of tf.nn.gelu), "
                      "to measure what that gradient saves (with the layer unfused: the "
                      "fused layer computes its own GELU)")
  child.add_arguments(parser)
  args = parser.parse_args(argv)
  # --seq-length as build_pretraining_dataset.py's --max-seq-length: room for text.
  cli.check_flags(parser, args, batch_size={"at_least": 1}, seq_length={"at_least": 8},
                  steps={"at_least": 1}, rounds={"at_least": 1}, threads={"at_least": 0})
  check_files(parser, args, "vocab_file")
  return args


def main(argv=None) -> int:
  args = parse_args(argv)
  return cli.run_command(lambda: measure_rows(args))


def measure_rows(args: argparse.Namespace) -> int:
  """Each row, each round, in a process of its own; then the table, for --impls."""
  impls = args.impls or [args.impl]
  shared = {"model_size": args.model_size, "batch_size": args.batch_size,
            "seq_length": args.seq_length, "steps": args.steps, "clock": args.clock,
            "threads": args.threads, "vocab_file": args.vocab_file}
  ours = {**shared, "use_xla": args.use_xla, "recompute": args.recompute,
          "autodiff_gelu": args.autodiff_gelu}
  rows = {peers.row_label(impl, peer, precision): (impl, peer, precision)
          for precision in args.precisions for impl in impls
          for peer in (args.peers if impl == "hf" else [None])}
  flops_per_step = step_flops(args.model_size, args.batch_size, args.seq_length,
                              args.vocab_file)
  gpu = "bfloat16" in args.precisions and peers.ours_on_gpu()
  results = {label: [] for label in rows}
  for _ in range(args.rounds):
    for label, (impl, peer, precision) in rows.items():
      row = {"impl": impl, "peer": peer, "precision": precision}
      if impl == "hf":
        result = peers.measure(run_hf, {**shared, "peer": peer, "precision": precision},
                               row, threads=args.threads, isa=args.isa)
      else:
        result = peers.measure(run_ours, {**ours, "impl": impl, "mixed_precision":
                                          peers.POLICIES[precision]}, row, gpu,
                               args.threads, args.isa, args.onednn)
      result = peers.with_peak_fraction(result, flops_per_step)
      results[label].append(result)
      print(json.dumps(result), flush=True)
  if args.impls:
    peer = args.peers[0] if impls[-1] == "hf" else None
    compare(rows, results,
            lambda precision: peers.row_label(impls[-1], peer, precision))
  return 0


def run_hf(model_size: str, batch_size: int, seq_length: int, steps: int, threads: int,
           clock: str, vocab_file: str = BERT_VOCAB, peer: str = "eager",
           precision: str = "float32") -> dict:
  """The PyTorch peer: the same ELECTRA step with transformers' modules, `peer` (eager
  or compiled) in `precision` (bench/peers.py)."""
  row = {"impl": "hf", "peer": peer, "precision": precision,
         "model": f"electra_{model_size}", "batch": batch_size, "seq": seq_length}
  import torch  # pylint: disable=g-import-not-at-top
  if threads:
    torch.set_num_threads(threads)
  from transformers import (ElectraConfig, ElectraForMaskedLM,  # pylint: disable=g-import-not-at-top
                            ElectraForPreTraining)
  from model.weights.huggingface import config_json  # pylint: disable=g-import-not-at-top
  from util import cpu  # pylint: disable=g-import-not-at-top
  config = bench_config(model_size, batch_size, seq_length, steps, vocab_file)
  disc = config.model_config()
  hf = lambda c: ElectraConfig(**config_json(c, "ElectraForPreTraining"))
  generator = ElectraForMaskedLM(hf(disc.generator_config())).train()
  discriminator = ElectraForPreTraining(hf(disc)).train()
  generator.electra.embeddings = discriminator.electra.embeddings  # shared, one copy
  generator.generator_lm_head.weight = discriminator.electra.embeddings.word_embeddings.weight
  params = {id(p): p for m in (generator, discriminator) for p in m.parameters()}
  optimizer = peers.optimizer(list(params.values()), 5e-4)
  # The modules as the peer runs them; the masking, sampling and optimizer stay eager.
  wrap, forward = peers.torch_variant(peer, precision)
  generator_encoder, discriminator_model = wrap(generator.electra), wrap(discriminator)
  generator_head = wrap(torch.nn.Sequential(generator.generator_predictions,
                                            generator.generator_lm_head))
  batch, seq = batch_size, seq_length
  n_pred = config.max_predictions_per_seq
  rng = torch.Generator().manual_seed(0)
  ids = torch.randint(1000, disc.vocab_size, (batch, seq), generator=rng)
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
    with forward():
      hidden = generator_encoder(input_ids=masked, attention_mask=mask).last_hidden_state
      picked = torch.gather(hidden, 1,
                            positions[..., None].expand(-1, -1, hidden.shape[-1]))
      logits = generator_head(picked).float()
      mlm = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                              originals.reshape(-1))
      with torch.no_grad():
        u = torch.rand(logits.shape, generator=rng)
        sampled = (logits - torch.log(-torch.log(u + 1e-9) + 1e-9)).argmax(-1)
      corrupted = ids.clone()
      corrupted.scatter_(1, positions, sampled)
      labels = (corrupted != ids).float()
      disc_logits = discriminator_model(input_ids=corrupted,
                                        attention_mask=mask).logits.float()
      disc_loss = torch.nn.functional.binary_cross_entropy_with_logits(disc_logits,
                                                                       labels)
      loss = mlm + config.disc_weight * disc_loss
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(list(params.values()), 1.0)
    optimizer.step()
    return loss.detach()

  timed = peers.time_peer(step, steps, 1, clock)
  if "unavailable" in timed:
    return {**row, **timed}
  steps_per_s = steps / timed["seconds"]
  return {**row, "threads": torch.get_num_threads(), "steps_per_s": round(steps_per_s, 4),
          "tokens_per_s": round(steps_per_s * batch * seq),
          "first_step_s": timed["first_step_s"],
          "peak_flops": cpu.cpu_peak_flops(peers.POLICIES[precision], threads)}


def compare(rows: dict, results: dict, reference):
  """The best tokens/s of each row over the rounds (its first result where it did not
  run), and its ratio to that of the row reference(its precision) labels."""
  best = {label: max(mine, key=lambda r: r.get("tokens_per_s", 0))
          for label, mine in results.items()}
  first = next(iter(best.values()))
  isa = first["isa"]
  print(f"CPU {isa}" + (" (emulated)" if isa != "native" else "") +
        f", ours' oneDNN {first['onednn']}")
  for label, r in best.items():
    against = reference(rows[label][2])
    peer = best.get(against, {}).get("tokens_per_s")
    ratio = f"{r['tokens_per_s'] / peer:.2f}x {against}" if peer and "tokens_per_s" in r \
        else f"no {against} to compare"
    print(peers.row_line(label, r, f"{r.get('tokens_per_s', 0):,} tokens/s | {ratio}"))
  print(json.dumps({label: {key: r[key] for key in (
      "tokens_per_s", "peak_rss_mib", "first_step_s", "peak_fraction", "unavailable")
                            if key in r} for label, r in best.items()}))


if __name__ == "__main__":
  sys.exit(main())
