"""What this CPU can do, read without TensorFlow, and the oneDNN setting chosen by it.

TensorFlow turns its oneDNN kernels on by default only on CPUs with AVX512_VNNI,
AVX512_BF16, AVX_VNNI or AMX (tensorflow/core/util/port.cc); elsewhere it runs Eigen's,
whose batched matrix product loops over the batch one small product at a time: the
attention's two products. Measured on an AVX2 CPU (emulated: bench/RESULTS.md, "oneDNN
on AVX2 CPUs"), oneDNN on is faster there, so the commands turn it on where TensorFlow
would leave it off, unless the user set TF_ENABLE_ONEDNN_OPTS (util/startup.py).

ASSUME_CPU_ENV set to "avx2" makes this module read the CPU as an AVX2-only one (its
AVX-512, AVX-VNNI and AMX flags dropped), so that the benches' --isa avx2 measure on a
newer CPU what an AVX2 machine's commands would choose.
"""

import dataclasses
import os
from typing import FrozenSet, Optional

ASSUME_CPU_ENV = "ELECTRA_ASSUME_CPU"
ONEDNN_ENV = "TF_ENABLE_ONEDNN_OPTS"
# Any of these and TensorFlow turns oneDNN on by itself (port.cc's IsMKLEnabled).
TF_ONEDNN_FLAGS = frozenset({"avx512_vnni", "avx512_bf16", "avx_vnni", "amx_tile",
                             "amx_bf16", "amx_int8"})
BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})  # bfloat16 arithmetic in hardware
# mixed_bfloat16's speed over float32 where the CPU has BF16_FLAGS: bench/bench_bf16.py
# on a 2-core AMD EPYC with AVX512_BF16 (bench/RESULTS.md, "oneDNN on AVX2 CPUs, an AVX2
# CPU emulated, and bfloat16 ..."); without them it is slower ("bfloat16 on this CPU
# without AVX-512 BF16").
BF16_SPEEDUP = {"pre-training": 1.20, "fine-tuning": 1.32}
# What cpu_info reads: the flags, model and a clock, and the CPU's maximum clock (kHz),
# which a virtual machine often lacks.
CPUINFO = "/proc/cpuinfo"
MAX_FREQ = "/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"


@dataclasses.dataclass(frozen=True)
class CpuInfo:
  model: str
  flags: FrozenSet[str]
  mhz: float  # the maximum where the kernel states it, else /proc/cpuinfo's clock
  assumed: str = ""  # ASSUME_CPU_ENV's value when it changed what is read
  # /proc/cpuinfo's is the current clock or, on a virtual machine, a nominal one below
  # what the cores reach.
  mhz_is_max: bool = False

  @property
  def tensorflow_enables_onednn(self) -> bool:
    return bool(self.flags & TF_ONEDNN_FLAGS)

  @property
  def has_bf16(self) -> bool:
    return bool(self.flags & BF16_FLAGS)


def cpu_info() -> CpuInfo:
  """This machine's CPU from /proc/cpuinfo (empty flags where there is none), as
  ASSUME_CPU_ENV says to read it."""
  model, flags, mhz, mhz_is_max = "unknown", set(), 0.0, False
  try:
    with open(CPUINFO, encoding="utf-8") as f:
      text = f.read()
  except OSError:
    text = ""
  for line in text.splitlines():
    name, _, value = line.partition(":")
    name = name.strip()
    if name == "flags" and not flags:
      flags = set(value.split())
    elif name == "model name" and model == "unknown":
      model = value.strip()
    elif name == "cpu MHz" and not mhz:
      mhz = float(value)
  try:
    with open(MAX_FREQ, encoding="utf-8") as f:
      mhz, mhz_is_max = int(f.read()) / 1000, True
  except (OSError, ValueError):
    pass
  assumed = os.environ.get(ASSUME_CPU_ENV, "")
  if assumed == "avx2":
    flags = {f for f in flags if not f.startswith(("avx512", "amx")) and f != "avx_vnni"}
  elif assumed:
    raise ValueError(f"{ASSUME_CPU_ENV}={assumed}: expected avx2 or nothing")
  return CpuInfo(model, frozenset(flags), mhz, assumed, mhz_is_max)


def cpu_peak_flops(precision: str = "float32", cores: int = 0) -> float:
  """The peak FLOP/s of this process's CPUs (of `cores` of them, when fewer): cores x
  maximum clock x FLOPs per cycle of the widest fused multiply-add the flags show
  (AVX-512: 2 units x 16 lanes x 2; AVX2 + FMA: 2 x 8 x 2; else SSE, 8); AVX-512 BF16
  doubles it for precision "mixed_bfloat16". 0 when it is not known: no maximum clock
  (a virtual machine's nominal one made a fine-tuning run "104% of peak")."""
  info = cpu_info()
  if not info.mhz_is_max:
    return 0.0
  flags = info.flags
  per_cycle = (64 if "avx512f" in flags else 32 if {"avx2", "fma"} <= flags else 8)
  if precision == "mixed_bfloat16" and "avx512_bf16" in flags:
    per_cycle *= 2
  available = len(os.sched_getaffinity(0))
  return min(cores or available, available) * info.mhz * 1e6 * per_cycle


def peak_fraction(flops_per_s: float, peak_flops: float) -> Optional[float]:
  """The fraction of the peak a measured rate reaches; None when the peak is unknown (0)
  or the fraction passes 1, which says the peak is wrong, not the rate."""
  fraction = flops_per_s / peak_flops if peak_flops else None
  return fraction if fraction is not None and fraction <= 1 else None


def bfloat16_note(info: CpuInfo) -> Optional[str]:
  if not info.has_bf16:
    return None
  return ("note: this CPU does bfloat16 arithmetic; \"mixed_precision\": "
          "\"mixed_bfloat16\" measured " + " and ".join(
              f"{speedup:.2f}x float32's speed in {phase}"
              for phase, speedup in BF16_SPEEDUP.items()) +
          " on one (bench/RESULTS.md)")


def precision_note(policy: str, info: CpuInfo) -> Optional[str]:
  """The line a run on this CPU (no GPU) in Keras policy `policy` gets: that
  mixed_bfloat16 would be faster (bfloat16_note), or that its 16-bit arithmetic is
  emulated here, many times slower than float32; None otherwise."""
  if policy == "float32":
    return bfloat16_note(info)
  if policy == "mixed_float16":
    return ("note: \"mixed_precision\": \"mixed_float16\" on a CPU: CPUs have no "
            "float16 arithmetic, so TensorFlow emulates it, many times slower than "
            "float32 (float16 is for GPUs); drop mixed_precision here")
  if policy == "mixed_bfloat16" and not info.has_bf16:
    return ("note: \"mixed_precision\": \"mixed_bfloat16\" on a CPU without bfloat16 "
            "arithmetic (AVX512_BF16 or AMX): measured 0.06-0.10x float32's speed on one "
            "(bench/RESULTS.md); drop mixed_precision here")
  return None


def onednn_choice(info: CpuInfo, environ=os.environ) -> Optional[str]:
  """The TF_ENABLE_ONEDNN_OPTS value to set: "1" on an x86 CPU where TensorFlow would
  leave oneDNN off, None where the user set it or TensorFlow's default stands."""
  if ONEDNN_ENV in environ or "sse2" not in info.flags or info.tensorflow_enables_onednn:
    return None
  return "1"
