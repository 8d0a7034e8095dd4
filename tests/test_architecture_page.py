"""docs/architecture.md's layout is the checkout's: what it names exists, every
folder and command is named, and its floors are .importlinter's."""

import configparser
import os
import re

from tests.helpers import ROOT

with open(os.path.join(ROOT, "docs", "architecture.md"), encoding="utf-8") as f:
  PAGE = f.read()
ROWS = {}  # first cell -> the rest, of the layout table
for line in PAGE.split("## One pre-training step")[0].splitlines():
  if line.startswith("| `"):
    first, rest = line[2:].split(" | ", 1)
    ROWS[first] = rest
NAMED = {name for first in ROWS for name in re.findall(r"`([^`]+)`", first)}


def modules(folder):
  return {name[:-3] for name in os.listdir(os.path.join(ROOT, folder))
          if name.endswith(".py") and name != "__init__.py"}


def test_every_file_the_page_names_exists():
  missing = []
  for first, rest in ROWS.items():
    folders = [n for n in re.findall(r"`([^`]+)`", first) if n.endswith("/")]
    # Paths from the root, and modules and scripts by name in the row's folders (or the
    # root); a bare name of another extension is a file a run writes.
    for name in re.findall(r"`([\w/.]+/[\w/.]*|\w+\.(?:py|sh))`", first + rest):
      places = [name] + [os.path.join(folder, name) for folder in folders]
      if not any(os.path.exists(os.path.join(ROOT, p)) for p in places):
        missing.append(f"{first}: {name}")
  missing += [path for path in re.findall(r"`([\w.]+/[\w/.]*)`", PAGE)  # the whole page's
              if not os.path.exists(os.path.join(ROOT, path))]
  assert not missing


def test_every_folder_and_command_is_named():
  with open(os.path.join(ROOT, ".gitignore"), encoding="utf-8") as f:
    ignored = {line.strip().strip("/") for line in f}
  folders = [d + "/" for d in os.listdir(ROOT) if os.path.isdir(os.path.join(ROOT, d))
             and not d.startswith(".") and d not in ignored]
  packages = [f"{d}{s}/" for d in folders for s in os.listdir(os.path.join(ROOT, d))
              if os.path.isfile(os.path.join(ROOT, d, s, "__init__.py"))]
  scripts = [n for n in os.listdir(ROOT) if n.endswith(".py")]
  assert not [p for p in folders + packages + scripts if p not in NAMED]
  for folder, pattern in (("tools", r"`(\w+)`"), ("bench", r"`(bench_\w+)`"),
                          ("experiments", r"`(\w+)`")):
    named = set(re.findall(pattern, ROWS[f"`{folder}/`"]))
    commands = {m for m in modules(folder) if folder != "bench" or m.startswith("bench_")}
    assert named == commands, f"{folder}/: the page names {sorted(named)}"


def test_the_floors_are_the_contracts():
  parser = configparser.ConfigParser()
  parser.read(os.path.join(ROOT, ".importlinter"))
  layers = parser["importlinter:contract:floors"]["layers"].split()
  contracts = [name for layer in layers for name in layer.split("|") if name]
  floors = PAGE.split("Floors, from the top:")[1].split(". ")[0]
  assert [name[:-1] for name in re.findall(r"`(\w+/)`", floors)] == contracts
