"""What this CPU means for the commands: `python -m tools.cpu`.

docs/pretraining.md, "This CPU", says what it prints; also the float32 peak the runs'
"of peak" figures divide by, or why it is unknown.
"""

import argparse
import json
import os
import sys

from util import startup  # first: sets TensorFlow's environment
from util import cli, cpu

SHOWN_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "avx_vnni",
               "amx_tile", "amx_bf16")


def summary() -> dict:
  info = cpu.cpu_info()
  users = os.environ.get(cpu.ONEDNN_ENV) if startup.ONEDNN_CHOICE is None else None
  if users is not None:
    onednn, by = users not in ("0", "false", "False"), f"you ({cpu.ONEDNN_ENV}={users})"
  elif startup.ONEDNN_CHOICE is not None:
    onednn, by = True, ("this project: TensorFlow leaves it off on this CPU, and it "
                        "measured faster on one (bench/RESULTS.md)")
  else:
    onednn, by = info.tensorflow_enables_onednn, "TensorFlow's default on this CPU"
  return {"cpu": info.model, "assumed": info.assumed or None,
          "flags": [f for f in SHOWN_FLAGS if f in info.flags], "onednn": onednn,
          "onednn_chosen_by": by, "bf16_hardware": info.has_bf16,
          "bfloat16_note": cpu.bfloat16_note(info), "mhz": info.mhz,
          "peak_gflops": round(cpu.cpu_peak_flops() / 1e9, 1) or None}


def describe(s: dict) -> str:
  lines = [f"{s['cpu']}" + (f" (read as {s['assumed']})" if s["assumed"] else "") +
           f": {' '.join(s['flags']) or 'none of ' + ', '.join(SHOWN_FLAGS)}",
           f"oneDNN: {'on' if s['onednn'] else 'off'}, chosen by {s['onednn_chosen_by']}"]
  if s["bfloat16_note"]:
    lines.append(s["bfloat16_note"].replace("note: this CPU", "bfloat16: this CPU"))
  else:
    lines.append("bfloat16: not in hardware; mixed_bfloat16 would be ~10x slower than "
                 "float32 here")
  lines.append(f"peak: {s['peak_gflops']:,} GFLOP/s float32 (at {s['mhz']:,.0f} MHz)"
               if s["peak_gflops"] else
               f"peak: unknown: no maximum clock (cpufreq) to reckon it from, only "
               f"/proc/cpuinfo's {s['mhz']:,.0f} MHz, which may be below it; runs print "
               "no fraction of the peak")
  return "\n".join(lines)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--json", action="store_true", help="print one JSON object")
  args = parser.parse_args(argv)

  def report() -> int:
    result = summary()
    print(json.dumps(result) if args.json else describe(result))
    return 0
  return cli.run_command(report)


if __name__ == "__main__":
  sys.exit(main())
