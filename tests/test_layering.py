"""The house's layering (.importlinter) holds, and its contracts do catch a break."""

import ast
import os
import shutil
import subprocess
import sys

import pytest

from tests.helpers import ROOT

PACKAGES = ("util", "training", "runs", "model", "data_prep", "pretrain", "finetune", "export",
            "tools")


def lint_imports(cwd) -> subprocess.CompletedProcess:
  return subprocess.run([os.path.join(os.path.dirname(sys.executable), "lint-imports"),
                         "--config", os.path.join(cwd, ".importlinter"), "--no-cache"],
                        cwd=cwd, capture_output=True, text=True,
                        env={**os.environ, "PYTHONPATH": str(cwd)})


def test_the_layering_contracts_are_kept():
  run = lint_imports(ROOT)
  assert run.returncode == 0, run.stdout[-3000:]
  assert "2 kept, 0 broken" in run.stdout


def test_an_upward_import_and_a_cycle_break_the_contracts(tmp_path):
  """Each contract reports its own break: the floors each upward import, the cycles
  the one between finetune's qa and tagging (the upward imports alone keep it)."""
  shutil.copy(os.path.join(ROOT, ".importlinter"), tmp_path)
  for package in ("experiments", "bench") + PACKAGES:  # every root package .importlinter names
    shutil.copytree(os.path.join(ROOT, package), tmp_path / package,
                    ignore=shutil.ignore_patterns("__pycache__"))
  for path, line in (("util/files.py", "from training import curves  # a floor up"),
                     ("finetune/errors.py", "from pretrain import config  # a room beside"),
                     ("bench/steps.py", "from experiments import exp_transfer  # a study"),
                     ("tools/flops.py", "from bench import child  # a bench, the floor up"),
                     ("finetune/qa/data.py", "from finetune.tagging import data as _"),
                     ("finetune/tagging/data.py", "from finetune.qa import data as _")):
    with open(tmp_path / path, "a") as f:
      f.write(f"\n{line}\n")
  run = lint_imports(tmp_path)
  assert run.returncode != 0
  assert "Contracts: 0 kept, 2 broken." in run.stdout, run.stdout[-3000:]
  for upward in ("util.files -> training.curves", "finetune.errors -> pretrain.config",
                 "bench.steps -> experiments.exp_transfer", "tools.flops -> bench.child"):
    assert upward in run.stdout
  cycles = run.stdout[run.stdout.rindex("no import cycles between the subpackages"):]
  assert "No cycles are allowed in finetune." in cycles and "- .tagging -> .qa" in cycles


def test_only_commands_parse_arguments():
  """Library rooms take their settings as objects; flags live in the scripts and tools/."""
  parsing = []
  for package in PACKAGES[:-1]:
    for folder, _, names in os.walk(os.path.join(ROOT, package)):
      for name in names:
        if name.endswith(".py"):
          path = os.path.join(folder, name)
          tree = ast.parse(open(path, encoding="utf-8").read())
          modules = {alias.name for node in ast.walk(tree)
                     if isinstance(node, (ast.Import, ast.ImportFrom))
                     for alias in getattr(node, "names", [])} | {
                         node.module for node in ast.walk(tree)
                         if isinstance(node, ast.ImportFrom)}
          if modules & {"argparse", "absl.flags", "flags"}:
            parsing.append(os.path.relpath(path, ROOT))
  assert not parsing


COMMANDS = ["build_pretraining_dataset.py", "run_pretraining.py", "run_finetuning.py"] + [
    os.path.join("tools", name) for name in sorted(os.listdir(os.path.join(ROOT, "tools")))
    if name.endswith(".py") and name != "__init__.py"]


@pytest.mark.slow
def test_commands_set_tensorflows_environment_before_anything_loads_it():
  """util.startup comes before every third-party or project import of each command
  (only the standard library may precede it), and after it TensorFlow loads without
  Keras 3 (tf.keras is tf_keras) and without its start-up chatter."""
  late = []
  for command in COMMANDS:
    tree = ast.parse(open(os.path.join(ROOT, command), encoding="utf-8").read())
    for node in tree.body:
      if not isinstance(node, (ast.Import, ast.ImportFrom)):
        continue
      names = [node.module] if isinstance(node, ast.ImportFrom) else [
          alias.name for alias in node.names]
      if isinstance(node, ast.ImportFrom) and node.module == "util" and any(
          alias.name == "startup" for alias in node.names):
        break
      if any(name.split(".")[0] not in sys.stdlib_module_names for name in names):
        late.append(f"{command}: {names[0]} before util.startup")
        break
    else:
      late.append(f"{command}: no util.startup")
  assert not late
  script = ("import sys; from util import startup; import tensorflow as tf, tf_keras; "
            "print('keras.src' in sys.modules, tf.keras.Model is tf_keras.Model)")
  env = {k: v for k, v in os.environ.items()
         if k not in ("TF_USE_LEGACY_KERAS", "TF_CPP_MIN_LOG_LEVEL")}
  run = subprocess.run([sys.executable, "-c", script], capture_output=True,
                       text=True, env=env, check=True)
  assert run.stdout.split() == ["False", "True"], run.stdout
  assert "cuInit" not in run.stderr and "oneDNN" not in run.stderr, run.stderr
