"""The error raised for unusable fine-tuning data: one line naming the file, line and
problem; and the one reader of JSON-lines task files, which raises it."""

import json
from typing import Iterator, Tuple


class DataError(ValueError):
  """Task data that cannot be read (missing file, malformed row, unknown label, ...)."""


def at(path: str, line: int, problem: str) -> DataError:
  """A DataError located at `path:line`, the form editors and terminals link to."""
  return DataError(f"{path}:{line}: {problem}")


def json_lines(path: str, opener=open) -> Iterator[Tuple[int, object]]:
  """(line number, its JSON value) of each line of `path` that is not blank."""
  try:
    lines = opener(path, "rb")
  except OSError as e:
    raise DataError(f"{path}: cannot read it ({e.strerror})") from None
  with lines:
    for number, raw in enumerate(lines, start=1):
      try:
        line = raw.decode("utf-8")
        if not line.strip():
          continue
        value = json.loads(line)
      except UnicodeDecodeError as e:
        raise at(path, number, f"not UTF-8 text (byte {e.start} of the line)") from None
      except json.JSONDecodeError as e:
        raise DataError(f"{path}:{number}:{e.colno}: invalid JSON: {e.msg}") from None
      yield number, value
