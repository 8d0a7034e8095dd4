"""The rows of a comparison with the PyTorch peer: which ones a bench runs, the peer's
variants, and what every row reports beside its speed.

A row is one implementation in one precision, each in its own process (bench/child.py):
- ours, or the peer (transformers' PyTorch modules) run "eager", as transformers runs
  by default, or "compiled": its modules under torch.compile (inductor, the default
  backend, which builds C++ kernels with the machine's compiler at the first step; the
  data's masking and the optimizer stay eager, as in the eager peer; the optimizer is
  the Trainer's default, torch's fused AdamW: `optimizer`);
- "float32", or "bfloat16": ours under the Keras policy mixed_bfloat16 (the config's
  mixed_precision), the peer's forward passes under torch.autocast("cpu",
  dtype=torch.bfloat16); in both the weights and the optimizer stay float32. On a CPU
  these rows run only where it does bfloat16 arithmetic (AVX512_BF16 or AMX,
  util/cpu.py).
A row that cannot run here is one line saying why (NO_BF16; a compiled peer whose
compilation failed: no C++ compiler, a compile error) and the bench goes on.

Every row that ran reports its first step's seconds apart from the timed steps
(`first_step_s`: ours' tracing, the compiled peer's compilation, which is shorter on a
re-run once inductor's on-disk cache holds the kernels; on batches of several lengths,
with the warm-up step where the second length compiled the model again, its length
dynamic from then on as torch.compile's default dynamic=None makes it) and its fraction
of the peak (`peak_fraction`): FLOPs per step as the project counts them (model/flops.py;
the same count for both sides at the same batch lengths, as they train the same model)
x steps/s, over the peak of the cores its threads may use (util/cpu.py; its bfloat16
peak for bfloat16 rows; "peak unknown" where the CPU states no maximum clock).
"""

import contextlib
from typing import Optional

from bench import child, choice_list
from bench.steps import CLOCKS, time_steps
from util import cli, cpu

PEERS = ("eager", "compiled")
# A row's precision and ours' Keras policy for it (the config's mixed_precision).
POLICIES = {"float32": "float32", "bfloat16": "mixed_bfloat16"}
NO_BF16 = "no bfloat16 arithmetic on this CPU"


def add_arguments(parser):
  """--peers and --precisions: the rows a bench runs (default: the eager peer and
  float32, the benches' rows before these flags)."""
  parser.add_argument("--peers", type=choice_list(PEERS), default=["eager"],
                      help="how the PyTorch peer runs, comma-separated: eager "
                      "(transformers as it is), compiled (its modules under "
                      "torch.compile; the compilation timed apart, as first_step_s) "
                      "(default: eager)")
  parser.add_argument("--precisions", type=choice_list(POLICIES),
                      default=["float32"],
                      help="comma-separated, each for ours and the peer: float32, "
                      "bfloat16 (ours: mixed_bfloat16; the peer: CPU autocast to "
                      "bfloat16; only where the CPU does bfloat16 arithmetic) "
                      "(default: float32)")


def unavailable(precision: str, isa: str = "native", gpu: bool = False) -> Optional[str]:
  """The line of a row in `precision` that cannot run on this CPU as the bench's --isa
  reads it (bench/child.py: an emulated AVX2 CPU has no bfloat16 arithmetic), or on a
  GPU when `gpu`; None where it can."""
  if precision == "bfloat16" and not gpu and (isa != "native" or
                                               not cpu.cpu_info().has_bf16):
    return NO_BF16
  return None


def measure(function, kwargs: dict, row: dict, gpu: bool = False, threads: int = 0,
            isa: str = "native", onednn: str = "auto") -> dict:
  """`row` (its impl, peer and precision) with function(**kwargs)'s figures, computed
  in a process of its own (child.measure), or with the line that says why it cannot
  run here."""
  why_not = unavailable(row["precision"], isa, gpu)
  if why_not:
    return {**row, "unavailable": why_not}
  return {**child.measure(function, kwargs, threads, isa, onednn), **row}


def ours_on_gpu() -> bool:
  """Whether ours would train on a GPU here (bfloat16 there needs no CPU support)."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  return bool(tf.config.list_physical_devices("GPU"))


def row_label(impl: str, peer: Optional[str], precision: str) -> str:
  """A table's name of a row: "ours", "hf", "hf compiled", each with " bfloat16" for
  its bfloat16 row."""
  return " ".join([impl] + (["compiled"] if peer == "compiled" else []) +
                  ([precision] if precision != "float32" else []))


def with_peak_fraction(row: dict, flops_per_step: float) -> dict:
  """`row` with its fraction of the peak (for a row that ran and knows its peak: none
  past 100%, which says the peak is wrong)."""
  if "steps_per_s" not in row:
    return row
  fraction = cpu.peak_fraction(flops_per_step * row["steps_per_s"],
                               row.get("peak_flops", 0.0))
  return row if fraction is None else {**row, "peak_fraction": float(f"{fraction:.4g}")}


def torch_variant(peer: str, precision: str):
  """How the peer runs: (wrap, forward) where wrap(module) is the module as it runs
  (compiled or as it is; same weights) and `with forward():` holds its forward passes
  (bfloat16 autocast, or nothing)."""
  import torch  # pylint: disable=import-outside-toplevel
  wrap = torch.compile if peer == "compiled" else (lambda module: module)
  if precision == "bfloat16":
    return wrap, lambda: torch.autocast("cpu", dtype=torch.bfloat16)
  return wrap, contextlib.nullcontext


def optimizer(parameters, learning_rate: float):
  """The peer's AdamW as transformers' Trainer builds it by default on torch >= 2.8
  ("adamw_torch_fused": one fused kernel for every tensor, where torch's own default
  loops over them), with the project's epsilon and weight decay."""
  import torch  # pylint: disable=import-outside-toplevel
  return torch.optim.AdamW(parameters, lr=learning_rate, eps=1e-6, weight_decay=0.01,
                           fused=True)


def compilations() -> int:
  """The graphs torch.compile has compiled in this process so far (none when eager)."""
  from torch._dynamo.utils import counters  # pylint: disable=import-outside-toplevel
  return counters["stats"]["unique_graphs"]


def time_peer(step, steps: int, warmup: int, clock: str) -> dict:
  """{"first_step_s", "seconds"} of the peer's step (as bench.steps.time_first_and_steps;
  a later warm-up step in which torch.compile compiled again, as at the second batch
  length it meets, counts with the first: its compilation is timed apart too;
  "timed_compilations" when the timed steps still compiled), or {"unavailable": the
  line} when torch.compile failed."""
  import torch  # pylint: disable=import-outside-toplevel
  now = CLOCKS[clock]
  try:
    start = now()
    float(step())
    first = now() - start
    for _ in range(max(warmup, 1) - 1):
      before, start = compilations(), now()
      float(step())
      if compilations() > before:
        first += now() - start
    before = compilations()
    seconds = time_steps(step, steps, 0, clock)
    recompiled = compilations() - before
  except torch._dynamo.exc.TorchDynamoException as e:  # pylint: disable=protected-access
    cause = getattr(e, "inner_exception", None) or e  # what the backend raised
    return {"unavailable": f"torch.compile failed: {type(cause).__name__}: "
                           f"{cli.first_line(cause, 160)}"}
  return {"first_step_s": round(first, 2), "seconds": seconds,
          **({"timed_compilations": recompiled} if recompiled else {})}


def row_line(label: str, row: dict, figures: str) -> str:
  """A table's line for `row`: its figures, or why it did not run."""
  if "unavailable" in row:
    return f"| {label} | {row['unavailable']} |"
  fraction = row.get("peak_fraction")
  return (f"| {label} | {figures} | first step {row['first_step_s']:.1f} s | "
          + (f"{fraction:.1%} of peak" if fraction is not None else "peak unknown")
          + f" | {row['peak_rss_mib']:,} MiB peak RSS |")
