"""The error raised for unusable fine-tuning data: one line naming the file, line and problem."""


class DataError(ValueError):
  """Task data that cannot be read (missing file, malformed row, unknown label, ...)."""


def at(path: str, line: int, problem: str) -> DataError:
  """A DataError located at `path:line`, the form editors and terminals link to."""
  return DataError(f"{path}:{line}: {problem}")
