"""The reader bundle beside the model files that need it: vocab.txt, deploy.json (the
task, its family's reader module and the fields it reads, lengths, the text's
normalisation (do_lower_case, strip_accents), the files and the input length each
takes) and reader.py (export/reader.py) with every project module it and the family's
reader import, found by following their module-level imports and copied as they are."""

import ast
import json
import os
import shutil
from typing import Dict, List

from export import reader
from export.source import Finetuned
from finetune.serving import Serving

READER = "reader.py"
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PACKAGES = {entry for entry in os.listdir(_ROOT)
             if os.path.isfile(os.path.join(_ROOT, entry, "__init__.py"))}


def _module_path(name: str) -> str:
  return name.replace(".", "/") + ".py"


def project_sources(start: str) -> Dict[str, str]:
  """{bundle path: repository path} of the project module `start` (dotted) and of every
  project module its module-level imports reach, with their packages' __init__.py."""
  found, pending = {}, [start]
  while pending:
    name = pending.pop()
    parts = name.split(".")
    if parts[0] not in _PACKAGES:
      continue
    for depth in range(1, len(parts)):
      init = "/".join(parts[:depth]) + "/__init__.py"
      if os.path.isfile(os.path.join(_ROOT, init)):
        found[init] = init
    path = _module_path(name)
    if not os.path.isfile(os.path.join(_ROOT, path)) or path in found:
      continue  # a package's name (its __init__.py is listed) or seen
    found[path] = path
    with open(os.path.join(_ROOT, path), encoding="utf-8") as f:
      tree = ast.parse(f.read())
    for node in tree.body:  # not inside functions: those imports are deferred on purpose
      if isinstance(node, ast.Import):
        pending.extend(alias.name for alias in node.names)
      elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
        pending.append(node.module)
        pending.extend(f"{node.module}.{alias.name}" for alias in node.names)
  return found


def reader_sources(deployable: Serving) -> Dict[str, str]:
  """Every file the reader needs, by its path in the bundle."""
  sources = {**project_sources(reader.__name__), **project_sources(deployable.reader)}
  del sources[_module_path(reader.__name__)]
  sources.pop("export/__init__.py", None)
  return {READER: _module_path(reader.__name__), **sources}


def input_lengths(folder: str, files: List[str]) -> Dict[str, object]:
  """Each model file's token axis, read from the file: "longest" (the reader feeds a
  batch at its longest example's length) or the fixed length the reader pads to."""
  lengths = {name: reader.input_length(os.path.join(folder, name)) for name in files
             if name.endswith((".tflite", ".onnx"))}
  return {name: length or "longest" for name, length in lengths.items()}


def write(finetuned: Finetuned, deployable: Serving, folder: str, files: List[str],
          calibrated: int, smoothed: Dict[str, float], grouped: Dict[str, int]):
  """vocab.txt, deploy.json and the reader with the modules it imports; `smoothed` and
  `grouped`: the files migrated (their alpha) and grouped (their outlier channels)."""
  shutil.copyfile(finetuned.vocab_file, os.path.join(folder, "vocab.txt"))
  info = {"task": finetuned.task.name, "family": finetuned.family.name,
          "reader": deployable.reader, **finetuned.normalization.fields(),
          "max_seq_length": finetuned.max_seq_length, "inputs": list(deployable.inputs),
          "models": files, "input_lengths": input_lengths(folder, files),
          "calibration_examples": calibrated, "smoothing_alpha": smoothed,
          "outlier_channels": grouped,
          "source": os.path.abspath(finetuned.folder), **deployable.info(finetuned.runner)}
  with open(os.path.join(folder, reader.INFO_FILE), "w", encoding="utf-8") as f:
    json.dump(info, f, indent=2)
  for target, source in reader_sources(deployable).items():
    os.makedirs(os.path.dirname(os.path.join(folder, target)), exist_ok=True)
    shutil.copyfile(os.path.join(_ROOT, source), os.path.join(folder, target))
