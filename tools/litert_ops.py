"""Which ops of a LiteRT model its default CPU delegate (XNNPACK) takes, by type and dtype.

  python -m tools.litert_ops MODEL.tflite [MODEL.tflite ...]

Per model: the op count, the XNNPACK partitions and how many ops they take, then one
line per op type and input dtypes with how many of those ops are left to LiteRT's own
(builtin) kernels. An op left outside XNNPACK runs on LiteRT's builtin kernel for it,
which for several int8 ops is the reference (scalar) one, and each one splits the
delegated graph. Needs only ai-edge-litert. (bench/RESULTS.md: why the
full-int8 model was no faster than float32.)

How the partitions are found: with the delegate applied, the interpreter lists every
original node and one DELEGATE node per partition; a partition's nodes are those reached
walking back from its outputs without crossing its inputs.
"""

import argparse
import collections
import os
import sys
from typing import Dict, List, Tuple

from util import startup  # pylint: disable=unused-import  # first: sets TensorFlow's environment

import numpy as np

from util import cli


def delegated_ops(path: str) -> Tuple[List[str], List[bool], int]:
  """Each original op's "TYPE[dtypes]", whether XNNPACK took it, and the partitions."""
  from ai_edge_litert.interpreter import Interpreter  # pylint: disable=import-outside-toplevel
  if not os.path.isfile(path) or not os.path.getsize(path):
    raise ValueError(f"{path}: " + ("an empty file" if os.path.isfile(path) else
                                    "no such file") + "; expected a .tflite model")
  try:
    interpreter = Interpreter(model_path=path, num_threads=1)
  except ValueError as e:  # LiteRT's words for a file that is not a model
    raise ValueError(f"{path}: not a LiteRT model ({cli.first_line(e)})") from None
  interpreter.allocate_tensors()
  dtypes = {t["index"]: np.dtype(t["dtype"]).name for t in interpreter.get_tensor_details()}
  nodes = interpreter._get_ops_details()  # pylint: disable=protected-access  # no public list
  originals = [n for n in nodes if n["op_name"] != "DELEGATE"]
  producer = {int(t): n["index"] for n in originals for t in n["outputs"]}
  taken = set()
  partitions = [n for n in nodes if n["op_name"] == "DELEGATE"]
  for partition in partitions:
    stop = {int(t) for t in partition["inputs"]}
    todo = [int(t) for t in partition["outputs"]]
    while todo:
      tensor = todo.pop()
      if tensor in stop or tensor not in producer or producer[tensor] in taken:
        continue
      node = nodes[producer[tensor]]
      taken.add(node["index"])
      todo.extend(int(t) for t in node["inputs"] if t >= 0)
  names = [f"{n['op_name']}[{'/'.join(sorted({dtypes[int(t)] for t in n['inputs'] if t >= 0}))}]"
           for n in originals]
  return names, [n["index"] in taken for n in originals], len(partitions)


def report(path: str) -> str:
  names, taken, partitions = delegated_ops(path)
  total = collections.Counter(names)
  outside: Dict[str, int] = collections.Counter(n for n, t in zip(names, taken) if not t)
  lines = [f"{path}: {len(names)} ops; XNNPACK: {partitions} partitions taking "
           f"{sum(taken)} ops, {len(names) - sum(taken)} left to the builtin kernels"]
  lines += [f"  {name:40s} {count:4d}  outside XNNPACK: {outside.get(name, 0)}"
            for name, count in sorted(total.items(), key=lambda kv: (-kv[1], kv[0]))]
  return "\n".join(lines)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("models", nargs="+", help=".tflite files")
  args = parser.parse_args(argv)

  def print_reports() -> int:
    for path in args.models:
      print(report(path))
    return 0
  return cli.run_command(print_reports)


if __name__ == "__main__":
  sys.exit(main())
