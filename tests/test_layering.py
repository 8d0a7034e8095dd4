"""The house's layering (.importlinter) holds, and its contracts do catch a break."""

import ast
import os
import shutil
import subprocess
import sys

from tests.conftest import ROOT

PACKAGES = ("util", "training", "model", "data_prep", "pretrain", "finetune", "tools")


def lint_imports(cwd) -> subprocess.CompletedProcess:
  return subprocess.run([os.path.join(os.path.dirname(sys.executable), "lint-imports"),
                         "--config", os.path.join(cwd, ".importlinter"), "--no-cache"],
                        cwd=cwd, capture_output=True, text=True,
                        env={**os.environ, "PYTHONPATH": str(cwd)})


def test_the_layering_contracts_are_kept():
  run = lint_imports(ROOT)
  assert run.returncode == 0, run.stdout[-3000:]
  assert "2 kept, 0 broken" in run.stdout


def copy_tree(destination):
  destination.mkdir(exist_ok=True)
  shutil.copy(os.path.join(ROOT, ".importlinter"), destination)
  for package in PACKAGES:
    shutil.copytree(os.path.join(ROOT, package), destination / package,
                    ignore=shutil.ignore_patterns("__pycache__"))


def test_an_upward_import_and_a_cycle_break_the_contracts(tmp_path):
  copy_tree(tmp_path)
  with open(tmp_path / "util" / "files.py", "a") as f:
    f.write("\nfrom training import curves  # a floor up\n")
  with open(tmp_path / "finetune" / "errors.py", "a") as f:
    f.write("\nfrom pretrain import config  # a room beside\n")
  run = lint_imports(tmp_path)
  assert run.returncode != 0
  assert "util.files -> training.curves" in run.stdout
  assert "finetune.errors -> pretrain.config" in run.stdout

  copy_tree(tmp_path / "cycle")
  with open(tmp_path / "cycle" / "finetune" / "qa" / "data.py", "a") as f:
    f.write("\nfrom finetune.tagging import data as _  # qa -> tagging\n")
  with open(tmp_path / "cycle" / "finetune" / "tagging" / "data.py", "a") as f:
    f.write("\nfrom finetune.qa import data as _  # tagging -> qa\n")
  run = lint_imports(tmp_path / "cycle")
  assert run.returncode != 0 and "BROKEN" in run.stdout


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
