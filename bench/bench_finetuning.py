"""Fine-tuning throughput: electra_small, batch 32, ours vs Hugging Face PyTorch, on
random ids (seq 128) or on a task's real training examples.

  python -m bench.bench_finetuning [--steps 30] [--warmup 5] [--rounds 2] [--layers]
      [--threads N] [--clock wall|cpu] [--model-size small]
  python -m bench.bench_finetuning --impls ours,hf --peers eager,compiled \
      --precisions float32,bfloat16   # the full comparison, random ids
  python -m bench.bench_finetuning --task sst2 --impls ours,hf --peers eager,compiled \
      [--glue-dir DIR] [--conll-dir DIR] [--batch-length-multiple N]   # real batches
  python -m bench.bench_finetuning --task sst2 --impls ours,ours_command \
      --steps 100 --warmup 100   # the whole command's training against its step

Runs by hand, never in CI. Each implementation runs in its own process (bench/child.py,
so peak RSS is its own), alternating for --rounds rounds. Ours is the real training step
of run_finetuning.py (bench/steps.py: Finetuner.train_loop's model, AdamW with
layer-wise learning rates, the task's loss, dropout, Finetuner.dataset_fn's input
pipeline; TrainLoop.train_step), timed after --warmup steps (before 2026-11-23 the
timing also held a second run's start-up: restore, tracing, the final checkpoint and
plot, which understated ours by about a quarter at 15 steps). The peer is transformers'
ElectraForSequenceClassification (ElectraForTokenClassification for chunk) with
torch's fused AdamW (the Trainer's default; before 2026-11-28 its unfused default) and
gradient clipping at 1.0, of the same config's sizes; it must be
installed for the benchmark only: pip install torch==2.13.0 transformers==5.23.0

The batches. Without --task (the results before it stay comparable): random token ids,
every batch 32 x 128 with no padding, a 2-class GLUE head (speed does not depend on the
weights or the ids). With --task sst2, cola, stsb, mrpc (GLUE's <--glue-dir>/SST-2/,
CoLA/, STS-B/, MRPC/train.tsv) or chunk (CoNLL-2000's <--conll-dir>/train.txt; the
defaults: ../shared/data/glue and ../shared/data/conll2000 beside the checkout): a child
of its own featurizes the task's training examples as run_finetuning.py does (the task
runner's examples and features through Finetuner: BERT's uncased vocabulary,
max_seq_length 128; MRPC and STS-B in both orders) and takes --steps batches of 32 in
the order a run's first trial draws them (Finetuner.train_order with the config's
seed: a fresh permutation each time through the file, grouped by length with
--length-grouping); both sides train on those
batches in that order, first untimed (the warm-up: --warmup rounded up to whole passes
over them), then timed. Ours reads them through its training input pipeline, which
cuts each batch to its longest example rounded up to --batch-length-multiple (default:
the config's batch_length_multiple; 0: max_seq_length), as a real run cuts them; the
peer's batches are each padded to their longest example, as transformers' Trainer pads
them (DataCollatorWithPadding; made before the timing), with stsb a 1-label regression
and chunk's labels at each word's first piece (-100, ignored, elsewhere).
The warm-up passes are there because a length is compiled when first met: ours traces
its step once but compiles its fused layer's XLA islands at each new length (about one
step's time, bench/RESULTS.md; ours_xla compiles the whole step), and under
torch.compile (dynamic=None, as users run it) the peer compiles again at the second
length it meets, its length dynamic from then on (that warm-up step counts with the
first in first_step_s; a row whose timed steps still compiled says how often). A long
run spreads those costs over thousands of steps; a timing of 30 would not.

The command row (--impls ours_command, with --task): the whole run_finetuning.py in a
process of its own, as a user runs it (from random weights, no evaluation, export or
curves, which come after the training steps), for --warmup + --steps steps of its first
trial; its steps after the warm-up are timed by the run's own log (the wall clock of its
TensorBoard events at their log lines, one every --steps steps), so its start-up and
its end stay out. Every row then trains on the batches of those timed steps (the run's
order after its first --warmup batches), so the command's rate stands beside its own
step's on the same batches ("of_step"); a length the run first meets in its timed steps
compiles there ("compilations in the timed steps"), as in a longer run it would once.
Its first_step_s is from the command's start (start-up, featurizing, tracing and the
first step), whole_s to its exit; wall clock only.

Rows (bench/peers.py, as in bench_pretraining): --precisions runs each implementation in
float32 and/or bfloat16 (ours: mixed_bfloat16; the peer: CPU autocast), --peers the peer
eager and/or under torch.compile; a bare command runs the rows it ran before these
flags (float32, the eager peer). A row that cannot run here (bfloat16 on a CPU without
bfloat16 arithmetic, a failed compilation, a child that failed) is one line saying why.
Every row that ran reports examples/s, real tokens/s (the timed batches' input_mask
summed: tokens that exist, the same for both sides), padded tokens/s (what it computed:
its batches' lengths x 32), the mean batch length, its first step's seconds
(first_step_s: ours' tracing, the compiled peer's compilation; the other --warmup steps
are untimed too) and its fraction of the peak (peak_fraction; FLOPs per step at its own
batch lengths: step_flops). The last line is every row's figures as JSON.
"""

import argparse
import glob
import itertools
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

from bench import SHARED_DATA, child, peers
from bench.steps import CLOCKS, finetuning_config, finetuning_step, time_first_and_steps
from util import cli

BATCH, SEQ, VOCAB = 32, 128, 30522
TASK = "glue/sst2"  # random batches: a 2-class GLUE task, the peer's model's head too
# --task: the project's task, the flag of the folder of its training file, that file.
TASKS = {"sst2": ("glue/sst2", "glue_dir", os.path.join("SST-2", "train.tsv")),
         "cola": ("glue/cola", "glue_dir", os.path.join("CoLA", "train.tsv")),
         "stsb": ("glue/stsb", "glue_dir", os.path.join("STS-B", "train.tsv")),
         "mrpc": ("glue/mrpc", "glue_dir", os.path.join("MRPC", "train.tsv")),
         "chunk": ("chunk", "conll_dir", "train.txt")}
DATA_DIRS = {"glue_dir": os.path.join(SHARED_DATA, "glue"),
             "conll_dir": os.path.join(SHARED_DATA, "conll2000")}


def hparams_of(model_size: str, **more) -> dict:
  """The fine-tuning hyperparameters of the timed step, both sides'."""
  return {"model_size": model_size, "train_batch_size": BATCH, "max_seq_length": SEQ,
          **more}


def random_batch(np, seed=0):
  rng = np.random.default_rng(seed)
  ids = rng.integers(1000, VOCAB, (BATCH, SEQ)).astype(np.int32)
  return {"input_ids": ids, "input_mask": np.ones_like(ids),
          "segment_ids": np.zeros_like(ids), "label": rng.integers(0, 2, BATCH)}


def read_train_file(task, path: str) -> list:
  """The examples of a task's training file, read by its family's reader."""
  from finetune.tasks import family_of  # pylint: disable=import-outside-toplevel
  return family_of(task).read_file(task, path, task.train_split)


def task_batches(task: str, path: str, batches: int, out: str, model_size: str,
                 skip: int = 0, multiple: int = 0, grouping: int = 0) -> dict:
  """`batches` x BATCH training features of `task`, made from its file `path` as
  run_finetuning.py makes them (the task runner's examples and features, max_seq_length
  SEQ, BERT's vocabulary), in the order a run's first trial draws them
  (Finetuner.train_order with the config's seed: a fresh permutation each time through
  the file, grouped by length in runs of `grouping` batches when not 0), after its
  first `skip` batches (the command row's warm-up),
  saved to `out` (.npz) in that order: the batches every row trains on. Its own child
  (TensorFlow's), so that the peer's stays free of TensorFlow. Returns the file's
  examples, the peer's number of labels and the lengths of the run's first skip +
  batches batches, cut at `multiple` (finetune/padding.py)."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  from finetune import padding  # pylint: disable=import-outside-toplevel
  from finetune.trainer import Finetuner  # pylint: disable=import-outside-toplevel
  finetuner = Finetuner(finetuning_config(TASKS[task][0], hparams_of(
      model_size, length_grouping_batches=grouping)), log=lambda _: None)
  runner = finetuner.runners[0]
  examples = runner.prepare_examples(read_train_file(runner.task, path), "train")
  features = runner.features(examples, "train")
  order = finetuner.train_order(features, skip + batches, finetuner.config.seed)
  features = {k: v[order] for k, v in features.items()}
  np.savez(out, **{k: v[skip * BATCH:] for k, v in features.items()})
  if task == "chunk":
    num_labels = len(runner.labels)
  else:
    num_labels = 1 if runner.task.is_regression else len(runner.task.labels)
  counts = padding.token_counts(features).reshape(-1, BATCH)
  return {"examples": len(examples), "num_labels": num_labels,
          "lengths": padding.batch_lengths(counts, multiple, SEQ).tolist()}


def warmup_steps(steps: int, warmup: int, task: str) -> int:
  """The untimed steps before the timed ones, the first among them: --warmup (at least
  one); with a task, rounded up to whole passes over the `steps` timed batches, which
  the warm-up runs as they will be timed, so that every batch length either side meets
  is compiled before the timing (as a long run spreads those costs over its steps)."""
  warmup = max(warmup, 1)
  return -(-warmup // steps) * steps if task else warmup


def cycled(features: dict, rows: int) -> dict:
  """`features` read in order and again from the start until `rows` rows."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  return {k: v[np.arange(rows) % len(v)] for k, v in features.items()}


def timed_batches(batches: list, steps: int, warmup: int) -> dict:
  """The lengths and real tokens (input_mask's sum) of the batches of the timed steps,
  those after the first step and the other warm-up ones."""
  timed = batches[max(warmup, 1):max(warmup, 1) + steps]
  return {"lengths": [b["length"] for b in timed],
          "real_tokens": sum(b["tokens"] for b in timed)}


def run_ours(impl: str, model_size: str, precision: str, steps: int, warmup: int,
             clock: str, task: str = "", batches: str = "",
             batch_length_multiple=None) -> dict:
  """first_step_s and the seconds of `steps` training steps of run_finetuning.py after
  `warmup` ones (the first among them), in `precision`, with the timed batches' lengths
  and real tokens: on random ids, or with `task` on the batches of file `batches`
  (task_batches'; in order, the warm-up's passes over them first), cut as the training
  input pipeline cuts them."""
  import numpy as np
  from model.fused import use_fused
  calls = max(warmup, 1) + steps
  if task:
    features = cycled(dict(np.load(batches)), calls * BATCH)
  else:
    features = random_batch(np)
    features["label"] = features["label"].astype(np.float32)
  more = ({} if batch_length_multiple is None
          else {"batch_length_multiple": batch_length_multiple})
  seen = []
  with tempfile.TemporaryDirectory() as folder:
    hparams = hparams_of(model_size, use_xla=impl == "ours_xla",
                         mixed_precision=peers.POLICIES[precision], **more)
    loop, step = finetuning_step(TASKS[task][0] if task else TASK, features, calls,
                                 hparams, folder, in_order=bool(task), batches=seen)
    use_fused(loop.train_step.model, impl != "ours_unfused")
    first, seconds = time_first_and_steps(step, steps, warmup, clock)
  return {"first_step_s": round(first, 2), "seconds": seconds,
          **timed_batches(seen, steps, warmup)}


def run_command(model_size: str, precision: str, steps: int, warmup: int, clock: str,
                task: str, batches: str, path: str, examples: int, lengths: list,
                batch_length_multiple=None, grouping: int = 0) -> dict:
  """The figures of the whole run_finetuning.py (a process of its own, as a user runs
  it) on `task`'s training file `path` (of `examples` examples), the bench's sizes in
  `precision`, from random weights, for `warmup` + `steps` training steps of its first
  trial (no evaluation, export or curves, which come after them): its steps
  warmup + 1 to warmup + steps, timed by the run's own log (its TensorBoard events'
  wall clock at those steps' log lines, log_every_steps being `steps`), train on the
  batches of file `batches` (task_batches', skip = warmup). `lengths`: every step's
  batch length (task_batches'), a length first met in the timed steps compiling there
  ("timed_compilations"). first_step_s counts from the command's start (start-up,
  featurizing, tracing); whole_s to its exit; peak_rss_mib is the command's."""
  if clock != "wall":
    return {"unavailable": "the command's steps are timed by its log's wall clock: "
                           "--clock wall"}
  import numpy as np
  import tensorflow as tf
  from bench import BERT_VOCAB, ROOT
  from finetune import tasks
  task_name = TASKS[task][0]
  more = ({} if batch_length_multiple is None
          else {"batch_length_multiple": batch_length_multiple})
  with tempfile.TemporaryDirectory() as folder:
    # The task's folder as the command finds it, <data-dir>/finetuning_data/<name>.
    data = os.path.join(folder, "finetuning_data")
    os.makedirs(data)
    os.symlink(os.path.dirname(os.path.abspath(path)),
               os.path.join(data, tasks.get_task(task_name).folders[0]))
    total = warmup + steps  # int(examples // BATCH * epochs) of the command
    hparams = hparams_of(
        model_size, mixed_precision=peers.POLICIES[precision], vocab_file=BERT_VOCAB,
        num_train_epochs=(total + 0.5) / (examples // BATCH), log_every_steps=steps,
        do_eval=False, export_serving=False, write_curves=False,
        length_grouping_batches=grouping,
        model_dir=os.path.join(folder, "model"),
        results_dir=os.path.join(folder, "results"), **more)
    start = time.time()
    run = subprocess.run(
        [sys.executable, os.path.join(ROOT, "run_finetuning.py"), "--task", task_name,
         "--data-dir", folder, "--model-name", "bench", "--hparams", json.dumps(hparams)],
        cwd=folder, capture_output=True, text=True, check=False)
    whole = time.time() - start
    if run.returncode:
      raise child.failed("run_finetuning.py", run.returncode, run.stderr)
    logged = {}  # step -> the wall clock of its loss in the log
    for name in glob.glob(os.path.join(folder, "model_1", "train", "events.*")):
      for event in tf.compat.v1.train.summary_iterator(name):
        if any(value.tag == "loss" for value in event.summary.value):
          logged[event.step] = event.wall_time
  return {"first_step_s": round(logged[1] - start, 2),
          "seconds": logged[total] - logged[warmup], "whole_s": round(whole, 1),
          "lengths": lengths[warmup:],
          "real_tokens": int(np.load(batches)["input_mask"].sum()),
          "timed_compilations": len(set(lengths[warmup:]) - set(lengths[:warmup])),
          "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
                                / 1024)}


def peer_batches(features: dict, tagging: bool, regression: bool) -> list:
  """The peer's batches of `features` (BATCH rows each, in order), each padded to its
  longest example as transformers' DataCollatorWithPadding pads them: torch tensors of
  its inputs and labels (tagging: each word's label at its first piece, -100, which the
  loss ignores, elsewhere)."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  import torch  # pylint: disable=import-outside-toplevel
  out = []
  for start in range(0, len(features["input_ids"]), BATCH):
    part = {k: v[start:start + BATCH] for k, v in features.items()}
    length = int(part["input_mask"].sum(-1).max())
    batch = {name: torch.from_numpy(part[key][:, :length].astype(np.int64))
             for name, key in (("input_ids", "input_ids"),
                               ("attention_mask", "input_mask"),
                               ("token_type_ids", "segment_ids"))}
    if tagging:
      labels = np.full((len(part["input_ids"]), length), -100, np.int64)
      rows, words = np.nonzero(part["word_label_mask"])
      labels[rows, part["word_positions"][rows, words]] = part["word_labels"][rows, words]
    else:
      labels = part["label"].astype(np.float32 if regression else np.int64)
    out.append({**batch, "labels": torch.from_numpy(labels)})
  return out


def run_hf(model_size: str, peer: str, precision: str, steps: int, warmup: int,
           clock: str, task: str = "", batches: str = "", num_labels: int = 2,
           grouping: int = 0) -> dict:
  """The peer's figures as run_ours' (bench/peers.py's time_peer: or why it did not
  run): transformers' classifier (or, for chunk, token classifier) of the same sizes,
  `peer` in `precision`, on the same batches, each padded to its longest example;
  with `grouping`, on the same examples in the order of its Trainer's group_by_length
  (its LengthGroupedSampler, seeded)."""
  import numpy as np
  import torch
  from transformers import (ElectraConfig, ElectraForSequenceClassification,
                            ElectraForTokenClassification)
  from model.weights.huggingface import config_json

  if task:
    features = dict(np.load(batches))
    if grouping:
      from transformers.trainer_pt_utils import LengthGroupedSampler
      order = list(LengthGroupedSampler(
          BATCH, lengths=features["input_mask"].sum(-1).tolist(),
          generator=torch.Generator().manual_seed(0)))
      features = {k: v[order] for k, v in features.items()}
    inputs = peer_batches(features, task == "chunk", num_labels == 1)
  else:
    inputs = peer_batches(random_batch(np), False, False)
  architecture = ElectraForSequenceClassification
  more = {"problem_type": "regression" if num_labels == 1 else
          "single_label_classification"}
  if task == "chunk":
    architecture, more = ElectraForTokenClassification, {}
  sizes = finetuning_config(TASK, hparams_of(model_size)).model_config()
  model = architecture(ElectraConfig(**config_json(
      sizes, architecture.__name__, num_labels=num_labels, **more))).train()
  optimizer = peers.optimizer(model.parameters(), 3e-4)
  wrap, forward = peers.torch_variant(peer, precision)
  runs = wrap(model)  # the same weights, as the peer runs them
  stream = itertools.cycle(inputs)

  def step():
    with forward():
      out = runs(**next(stream))
    optimizer.zero_grad()
    out.loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return out.loss.detach()

  timed = peers.time_peer(step, steps, warmup, clock)
  if "unavailable" in timed:
    return timed
  calls = itertools.islice(itertools.cycle(inputs), max(warmup, 1) + steps)
  return {**timed, **timed_batches(
      [{"length": int(b["input_ids"].shape[1]), "tokens": int(b["attention_mask"].sum())}
       for b in calls], steps, warmup)}


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
             precision: str = "float32", task: str = "", batches: str = "",
             batch_length_multiple=None, num_labels: int = 2, command=None,
             grouping: int = 0) -> dict:
  """One implementation's figures, in the process bench/child.py starts for it
  (`command`: run_command's path, examples and lengths)."""
  from util import cpu
  if impl in ("hf", "torch_layer"):
    import torch
    torch.set_num_threads(threads)
  if impl in ("tf_layer", "torch_layer"):
    return {"impl": impl, "ms": time_layer(impl.split("_")[0], clock)}
  data = {"task": task, "batches": batches}
  if impl == "hf":
    timed = run_hf(model_size, peer, precision, steps, warmup, clock, **data,
                   num_labels=num_labels, grouping=grouping)
  elif impl == "ours_command":
    timed = run_command(model_size, precision, steps, warmup, clock, **data, **command,
                        batch_length_multiple=batch_length_multiple, grouping=grouping)
  else:
    timed = run_ours(impl, model_size, precision, steps, warmup, clock, **data,
                     batch_length_multiple=batch_length_multiple)
  if "unavailable" in timed:
    return {"impl": impl, **timed}
  seconds = timed["seconds"]
  return {"impl": impl, "examples_per_s": steps * BATCH / seconds,
          "steps_per_s": steps / seconds, **timed,
          "real_tokens_per_s": timed["real_tokens"] / seconds,
          "padded_tokens_per_s": BATCH * sum(timed["lengths"]) / seconds,
          "mean_batch_length": sum(timed["lengths"]) / steps,
          "peak_flops": cpu.cpu_peak_flops(peers.POLICIES[precision], threads)}


def existing(folder: str):
  """`folder` if it exists, else None (a default that is not there)."""
  return folder if os.path.isdir(folder) else None


def data_file(parser, args) -> str:
  """The training file of --task, or parser.error's one line naming its folder's flag."""
  _, dest, name = TASKS[args.task]
  flag, folder = "--" + dest.replace("_", "-"), getattr(args, dest)
  if folder is None:
    parser.error(f"{flag}: not given, and {DATA_DIRS[dest]} (its default) does not "
                 f"exist; give the folder holding {name}")
  path = os.path.join(folder, name)
  if not os.path.isfile(path):
    parser.error(f"{flag} {folder}: no {name} there (the training file of "
                 f"{args.task})")
  return path


def main() -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--steps", type=int, default=30)
  parser.add_argument("--warmup", type=int, default=5)
  parser.add_argument("--rounds", type=int, default=2)
  parser.add_argument("--model-size", default="small",
                      help="a size preset, configs/finetuning/<size>.json (--layers "
                      "times electra_small's layer whatever it is)")
  parser.add_argument("--impls", default="ours,ours_xla,hf",
                      help="of ours, ours_unfused (the transformer layer's elementwise "
                      "work unfused, model/fused.py off), ours_xla, ours_command (the "
                      "whole run_finetuning.py, its training steps timed by its log; "
                      "with --task), hf")
  parser.add_argument("--task", choices=sorted(TASKS),
                      help="train on this task's real training examples, the same "
                      "batches in the same order on both sides (default: random ids, "
                      f"{BATCH} x {SEQ})")
  parser.add_argument("--glue-dir", default=existing(DATA_DIRS["glue_dir"]),
                      help="GLUE's folder, holding SST-2/, CoLA/, STS-B/, MRPC/ "
                      "(default: ../shared/data/glue beside the checkout)")
  parser.add_argument("--conll-dir", default=existing(DATA_DIRS["conll_dir"]),
                      help="CoNLL-2000's folder, holding train.txt (default: "
                      "../shared/data/conll2000 beside the checkout)")
  parser.add_argument("--batch-length-multiple", type=int, default=None,
                      help="ours' batches cut to their longest example rounded up to a "
                      "multiple of this; 0: padded to max_seq_length (default: the "
                      "config's, as run_finetuning.py)")
  parser.add_argument("--length-grouping", type=int, default=0, metavar="N",
                      help="with --task, batches of like lengths: ours' order is a run's "
                      "with length_grouping_batches N, the peer's that of its Trainer's "
                      "group_by_length on the same examples (default 0: the original's "
                      "random batches on both sides)")
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
  cli.check_flags(parser, args, steps={"at_least": 1}, warmup={"at_least": 0},
                  rounds={"at_least": 1}, threads={"at_least": 1},
                  batch_length_multiple={"at_least": 0}, length_grouping={"at_least": 0})
  if args.length_grouping and not args.task:
    parser.error("--length-grouping: batches of like lengths are a task's: give --task")
  path = data_file(parser, args) if args.task else None
  return cli.run_command(lambda: compare(args, path))


def compare(args, path) -> int:
  """Every row, --rounds times, then the table of each row's best round and its JSON;
  1 when a row failed."""
  rows = {peers.row_label(impl, peer, precision): (impl, peer, precision)
          for precision in args.precisions for impl in args.impls.split(",")
          for peer in (args.peers if impl == "hf" else [None])}
  layer_children = ["tf_layer", "torch_layer"] if args.layers else []
  gpu = "bfloat16" in args.precisions and peers.ours_on_gpu()
  multiple = (args.batch_length_multiple if args.batch_length_multiple is not None else
              finetuning_config(TASK, hparams_of(args.model_size)).batch_length_multiple)
  warmup = warmup_steps(args.steps, args.warmup, args.task)
  shared = {"steps": args.steps, "warmup": warmup, "threads": args.threads,
            "clock": args.clock, "model_size": args.model_size}
  # The command row's warm-up is its run's first steps: every row trains on the batches
  # after them, those of its timed steps.
  skip = warmup if "ours_command" in args.impls.split(",") else 0
  made = {}
  results = {label: [] for label in list(rows) + layer_children}
  with tempfile.TemporaryDirectory() as folder:
    if args.task:
      batches = os.path.join(folder, "batches.npz")
      made = one_line(child.measure, f"{args.task}'s batches")(task_batches, {
          "task": args.task, "path": path, "batches": args.steps, "out": batches,
          "model_size": args.model_size, "skip": skip, "multiple": multiple,
          "grouping": args.length_grouping},
                                                             args.threads)
      shared.update(task=args.task, batches=batches, grouping=args.length_grouping)
    for round_ in range(args.rounds):
      for label, (impl, peer, precision) in rows.items():
        row = {"impl": impl, "peer": peer, "precision": precision}
        ours = impl.startswith("ours")
        more = ({"batch_length_multiple": args.batch_length_multiple} if ours else
                {"num_labels": made["num_labels"]} if args.task else {})
        if impl == "ours_command" and args.task:
          more["command"] = {"path": path, "examples": made["examples"],
                             "lengths": made["lengths"]}
        try:
          result = ({**row, "unavailable": "the command trains on a task's examples: "
                                           "give --task"}
                    if impl == "ours_command" and not args.task else peers.measure(
                        run_impl, {**shared, **row, **more}, row, ours and gpu,
                        args.threads, args.isa, args.onednn if ours else "auto"))
        except child.ChildFailed as e:  # one line, and the table goes on
          result = {**row, "unavailable": f"failed: {e.line}", "failed": True}
        result = peers.with_peak_fraction(
            result, step_flops(args.model_size, result.get("lengths")))
        results[label].append(result)
        figures = (result["unavailable"] if "unavailable" in result else
                   f"{result['examples_per_s']:8.1f} examples/s "
                   f"{result['real_tokens_per_s']:9.0f} real tokens/s peak RSS "
                   f"{result['peak_rss_mib']:7.0f} MiB")
        print(f"round {round_ + 1} {label:22s} {figures}", flush=True)
      for impl in layer_children:
        result = one_line(child.measure, impl)(
            run_impl, {**shared, "impl": impl}, args.threads, args.isa,
            args.onednn if impl == "tf_layer" else "auto")
        results[impl].append(result)
        print(f"round {round_ + 1} {impl:22s} " + ", ".join(
            f"{name} {ms:.1f} ms" for name, ms in result["ms"].items()), flush=True)
  data = f"random ids, batch {BATCH} x seq {SEQ}"
  if args.task:
    data = (f"{args.task}'s training examples ({made['examples']} in {path}; "
            f"{args.steps} batches of {BATCH} in a run's order"
            + (f" after its first {skip}" if skip else "") + ", run "
            f"{warmup // args.steps} time(s) untimed, then timed), max_seq_length {SEQ}, "
            f"ours' batches cut to a multiple of {multiple} (0: none), the peer's to "
            "their longest" + (f"; grouped by length (ours: length_grouping_batches "
                               f"{args.length_grouping}; the peer: its group_by_length)"
                               if args.length_grouping else ""))
  print(f"\nelectra_{args.model_size} fine-tuning on {data}, {args.threads} threads, "
        f"{args.clock} clock, CPU {args.isa}" +
        (" (emulated)" if args.isa != "native" else "") + f", oneDNN {args.onednn}, "
        f"best of {args.rounds} rounds:")
  figures = {}
  for label in rows:
    best = max(results[label], key=lambda r: r.get("examples_per_s", 0))
    if "unavailable" in best:
      figures[label] = {"unavailable": best["unavailable"]}
    else:
      rate = best["examples_per_s"]
      flops = step_flops(args.model_size, best["lengths"])
      figures[label] = {
          "examples_per_s": round(rate, 2), "step_ms": round(1000 * BATCH / rate),
          "real_tokens_per_s": round(best["real_tokens_per_s"]),
          "padded_tokens_per_s": round(best["padded_tokens_per_s"]),
          "mean_batch_length": round(best["mean_batch_length"], 1),
          "real_tokens": best["real_tokens"],
          "peak_rss_mib": round(max(r["peak_rss_mib"] for r in results[label]
                                    if "peak_rss_mib" in r)),
          "gflop_per_s": round(rate * flops / BATCH / 1e9, 1),
          "first_step_s": best["first_step_s"],
          **{k: best[k] for k in ("peak_fraction", "timed_compilations", "whole_s")
             if k in best}}
    late = figures[label].get("timed_compilations")
    print(peers.row_line(label, {**best, **figures[label]}, (
        f"{figures[label].get('examples_per_s', 0):.1f} examples/s | "
        f"{figures[label].get('real_tokens_per_s', 0):,} real tokens/s | "
        f"{figures[label].get('padded_tokens_per_s', 0):,} padded tokens/s | "
        f"mean length {figures[label].get('mean_batch_length')} | "
        f"{figures[label].get('step_ms')} ms/step | "
        f"{figures[label].get('gflop_per_s')} GFLOP/s") +
                         (f" | {late} compilations in the timed steps" if late else "")))
  for label in rows:  # the command's training against its own step's, same batches
    step_label = label.replace("ours_command", "ours")
    if label != step_label and "examples_per_s" in figures[label] and "examples_per_s" in \
        figures.get(step_label, {}):
      ratio = figures[label]["examples_per_s"] / figures[step_label]["examples_per_s"]
      figures[label]["of_step"] = round(ratio, 3)
      print(f"{label}: {ratio:.3f}x the examples/s of {step_label}'s step on the same "
            f"batches (the whole command: {figures[label]['whole_s']} s)")
  for impl in layer_children:
    mine = [r["ms"] for r in results[impl]]
    figures[impl] = {name: round(min(ms[name] for ms in mine), 1) for name in mine[0]}
    print(f"| {impl} | " + " | ".join(f"{name} {ms} ms"
                                      for name, ms in figures[impl].items()) + " |")
  print(json.dumps(figures))
  return int(any(r.get("failed") for label in rows for r in results[label]))


def one_line(measure, what: str):
  """`measure` (child.measure), a child's crash raised as a ValueError of its last line,
  which the command shows as one line (a child's own refusal already is one)."""
  def call(*args):
    try:
      return measure(*args)
    except child.ChildError:
      raise
    except child.ChildFailed as e:
      raise ValueError(f"{what}: {e.line}") from None
  return call


def step_flops(model_size: str, lengths=None) -> float:
  """Training FLOPs of one step as the project counts them (model/flops.py, the
  original's convention: backward = forward, the embedding lookup as a one-hot matrix
  product), not what the hardware executes, averaged over the batches' `lengths` (SEQ
  when not given): the same for ours and the peer at the same lengths, as they train
  the same model."""
  from model.flops import finetuning_flops_per_step
  config = finetuning_config(TASK, hparams_of(model_size)).model_config()
  lengths = lengths or [SEQ]
  return sum(finetuning_flops_per_step(config, length, BATCH)
             for length in lengths) / len(lengths)


if __name__ == "__main__":
  sys.exit(main())
