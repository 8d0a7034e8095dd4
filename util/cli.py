"""How every command ends: an expected failure is one line on stderr, never a traceback.

The three top-level scripts and the tools run their work through `run_command`: bad input
(ValueError), a file that cannot be read or written (OSError, TensorFlow's OpError), and
Ctrl-C or SIGTERM each become one line naming what failed. A bug keeps its traceback.
"""

import re
import sys
from typing import Callable, Optional

EXIT_ERROR = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a Ctrl-C
_OP_CONTEXT = re.compile(r"^\{\{[^}]*\}\}\s*|\s*\[Op:\w+\]( name:\s*\S*)?\s*$")


class Interrupted(Exception):
  """The user stopped the command; the message says what was kept or saved."""


class Terminated(KeyboardInterrupt):
  """SIGTERM, raised where Ctrl-C's KeyboardInterrupt would be (util/startup.py), so
  that every clean-up a Ctrl-C runs (locks, temporary files) runs for it too."""


def error_message(e: BaseException) -> Optional[str]:
  """The one line for an expected failure, or None for anything else (a bug)."""
  if isinstance(e, OSError):
    if e.filename is None:
      return str(e)
    both = f"{e.filename} -> {e.filename2}" if e.filename2 else str(e.filename)
    return f"{both}: {e.strerror or e}"
  tf = sys.modules.get("tensorflow")  # only loaded TensorFlow can raise its errors
  if tf is not None and isinstance(e, tf.errors.OpError):
    return op_error_text(e)
  if isinstance(e, ValueError):
    return str(e)
  return None


def op_error_text(e) -> str:
  """The first line of a TensorFlow OpError's message (of a compiled function's, the
  first after the failed node's stack) without the op's names and graph context, which
  say nothing to a user (its messages name the file and the reason)."""
  lines = e.message.strip().splitlines()
  if lines and lines[0].startswith("Graph execution error"):
    lines = [line for line in lines[1:] if line.strip() and not line.startswith(
        ("Detected at node", " ", "\t"))]
  message = " ".join((lines or [""])[0].split())
  return _OP_CONTEXT.sub("", message) or type(e).__name__


def first_line(e: BaseException, limit: int = 0) -> str:
  """The first line of an exception's message (its type's name when it has none),
  shortened to about `limit` characters at a word's end, with "...", when given."""
  line = (str(e).strip().splitlines() or [type(e).__name__])[0]
  if limit and len(line) > limit:
    line = line[:limit].rsplit(" ", 1)[0].rstrip(",;:") + " ..."
  return line


def listed(names, n: int = 5) -> str:
  """The first n of `names` (sorted), and how many more, for a one-line message."""
  names = sorted(names)
  return ", ".join(names[:n]) + (f" (+{len(names) - n} more)" if len(names) > n else "")


def check_flags(parser, args, **rules) -> None:
  """Refuses, as argparse refuses a malformed value (parser.error: its usage, then one
  line), a parsed flag outside its rule: {dest: {"kind": int, "at_least": 1, ...}} with
  hparams.field's rules, so that flags and hyperparameters say the same. A flag left at
  a default of None is not checked."""
  from util import hparams  # pylint: disable=import-outside-toplevel
  for dest, rule in rules.items():
    value = getattr(args, dest)
    if value is None:  # left at a default of none
      continue
    try:  # rule's "kind" is check_flag's own
      setattr(args, dest, hparams.check_flag("--" + dest.replace("_", "-"), value, **rule))
    except hparams.HParamsError as e:
      parser.error(str(e))


def check_fraction_or_none(parser, args, dest: str) -> None:
  """Reads the text flag `dest` as a number from 0 to 1, or "none" (None); refuses
  anything else (parser.error)."""
  value = getattr(args, dest)
  if value == "none":
    setattr(args, dest, None)
    return
  try:
    number = float(value)
  except ValueError:
    number = -1.0
  if not 0 <= number <= 1:
    parser.error(f"--{dest.replace('_', '-')} {value!r}: expected a number from 0 to 1, "
                 "or none")
  setattr(args, dest, number)


def check_given(parser, args, *dests: str) -> None:
  """Refuses (parser.error) an empty path flag, which would fail only once the work is
  done, naming a temporary file or nothing (not for a flag whose default is "")."""
  for dest in dests:
    value = getattr(args, dest)
    if value is not None and not value.strip():
      parser.error(f"--{dest.replace('_', '-')} {value!r}: expected a path")


def add_vocab_flags(parser) -> None:
  """--vocab and --cased, as the tools reading a model's text (--checkpoint DIR) take them."""
  parser.add_argument("--vocab", default="", help="vocab.txt (default: beside DIR)")
  parser.add_argument("--cased", action="store_true",
                      help="the model's tokenizer keeps case and accents (for a model "
                           "whose tokenizer_config.json records nothing, as a released "
                           "one; one that records lower-casing, or an uncased "
                           "vocabulary, refuses it)")


def run_command(body: Callable[[], int]) -> int:
  """`body()`'s exit status; an expected failure printed as one line (status 2), an
  interruption as one line (status 130)."""
  try:
    return body()
  except (Interrupted, KeyboardInterrupt) as e:
    print(f"interrupted: {str(e) or 'Ctrl-C'}", file=sys.stderr)
    return EXIT_INTERRUPTED
  except Exception as e:  # pylint: disable=broad-except
    message = error_message(e)
    if message is None:
      raise
    print(f"error: {message}", file=sys.stderr)
    return EXIT_ERROR
