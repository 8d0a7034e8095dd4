"""The export command's former name: `python -m tools.export_lite` runs tools.export."""

import sys

from util import startup  # pylint: disable=unused-import  # first: sets TensorFlow's environment

from tools.export import main  # pylint: disable=wrong-import-position

if __name__ == "__main__":
  sys.exit(main())
