"""docs/hparams.md is what tools.hparams_reference writes from the fields' declarations
now: a field added, changed or helped anew needs the page written again."""

import os

from tests.helpers import ROOT
from tools import hparams_reference


def test_the_committed_reference_is_current():
  with open(os.path.join(ROOT, "docs", "hparams.md"), encoding="utf-8") as f:
    committed = f.read()
  assert committed == hparams_reference.reference(), (
      "docs/hparams.md is not what the fields' declarations say now; write it again "
      f"with: {hparams_reference.COMMAND}")


def test_every_field_says_what_it_does():
  page = hparams_reference.reference()
  rows = [line for line in page.splitlines() if line.startswith("| `")]
  assert len(rows) > 80
  assert not [row for row in rows if row.rstrip().endswith("|  |")], (
      "a field without a meaning: give its declaration a help")


def test_output_writes_the_page(tmp_path):
  path = tmp_path / "hparams.md"
  hparams_reference.main(["--output", str(path)])
  assert path.read_text(encoding="utf-8") == hparams_reference.reference()
