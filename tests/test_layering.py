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


# The calls that open a file or folder for writing (open's in a writing mode).
WRITERS = {"atomic_write", "atomic_directory", "create_file_writer", "copyfile", "copy",
           "copy2", "copytree", "move", "save_folder", "save_variables",
           "SaveV2", "write_text", "write_bytes"}


def model_dir_writes(source: str, names) -> list:
  """"line: call" of each call in `source` that writes (WRITERS, open in a writing
  mode, normalization.write) a path that names a model dir (a `model_dir`), one of its
  files (`names`: runs/model_files.py's constants and their values) or a variable of
  the same function joined from either (os.path.join)."""
  named = lambda node: {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {
      n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)} | {
          n.value for n in ast.walk(node) if isinstance(n, ast.Constant)}
  found = set()
  tree = ast.parse(source)
  functions = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)]
  for scope in [tree] + functions:
    tainted, size = {"model_dir"} | set(names), 0
    while size != len(tainted):
      size = len(tainted)
      tainted |= {target.id for node in ast.walk(scope) if isinstance(node, ast.Assign)
                  and isinstance(node.value, ast.Call)
                  and getattr(node.value.func, "attr", "") == "join"
                  and named(node.value) & tainted
                  for target in node.targets if isinstance(target, ast.Name)}
    for node in ast.walk(scope):
      if not isinstance(node, ast.Call):
        continue
      func = node.func
      name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
      mode = (node.args[1:2] or [kw.value for kw in node.keywords if kw.arg == "mode"])
      writing = (name in WRITERS or name == "open" and mode and isinstance(
          mode[0], ast.Constant) and set(str(mode[0].value)) & set("wax+")
          or name == "write" and getattr(func.value, "id", "") == "normalization")
      if writing and named(node) & tainted:
        found.add(f"{node.lineno}: {ast.unparse(node)[:80]}")
  return sorted(found, key=lambda line: int(line.split(":")[0]))


def test_only_runs_writes_into_a_model_dir():
  """Every write into a model dir goes through runs/ (runs/model_files.py): no module
  of another room of the product, nor a script, writes a path naming a model dir or one
  of its files; and the scan does find such a write."""
  from runs import model_files  # pylint: disable=import-outside-toplevel
  names = {name for name, value in vars(model_files).items()
           if name.isupper() and isinstance(value, str)}
  # The files' own names too, but for vocab.txt: every vocabulary's (data dirs', exports')
  names |= {getattr(model_files, name) for name in names
            if "." in getattr(model_files, name) and name != "RUN_VOCAB"}
  writes = []
  for package in PACKAGES:
    for folder, _, files in os.walk(os.path.join(ROOT, package)):
      for file in files:
        path = os.path.join(folder, file)
        if file.endswith(".py") and package != "runs":
          with open(path, encoding="utf-8") as f:
            writes += [f"{os.path.relpath(path, ROOT)}:{line}"
                       for line in model_dir_writes(f.read(), names)]
  for script in COMMANDS[:3]:
    with open(os.path.join(ROOT, script), encoding="utf-8") as f:
      writes += [f"{script}:{line}" for line in model_dir_writes(f.read(), names)]
  assert not writes, writes
  planted = ("with files.atomic_write(os.path.join(config.model_dir, 'x.json')) as f:\n"
             "  pass\nopen(os.path.join(folder, LOG_NAME), 'a')\n"
             "normalization.write(trial_dir, n)\nopen(config.model_dir)\n"
             "path = os.path.join(config.model_dir, 'results')\nshutil.copy(x, path)\n")
  found = model_dir_writes(planted, names)
  assert [line.split(":")[0] for line in found] == ["1", "3", "7"], found
