"""Corpus reading: listing the text files, splitting them between processes, streaming lines.

The corpus is never loaded: each process reads its own byte range of the (sorted)
files line by line. Ranges start and end at line starts, so every line belongs to
exactly one process and the split depends only on the files and the process count.
"""

import dataclasses
import os
from typing import Iterator, List, Tuple


class CorpusError(ValueError):
  """A corpus that cannot be read."""


@dataclasses.dataclass(frozen=True)
class Span:
  """Bytes [start, end) of one file; start is 0 or just after a newline."""
  path: str
  start: int
  end: int


def list_files(corpus_dir: str) -> List[str]:
  """The corpus's text files, sorted by name (hidden files skipped)."""
  if not os.path.exists(corpus_dir):
    raise CorpusError(f"--corpus-dir: {corpus_dir} does not exist")
  if not os.path.isdir(corpus_dir):
    raise CorpusError(f"--corpus-dir: {corpus_dir} is not a directory (expected a "
                      "directory of text files)")
  files = [os.path.join(corpus_dir, name) for name in sorted(os.listdir(corpus_dir))
           if not name.startswith(".") and os.path.isfile(os.path.join(corpus_dir, name))]
  if not files:
    raise CorpusError(f"--corpus-dir: {corpus_dir} holds no text files")
  if not any(os.path.getsize(path) for path in files):
    raise CorpusError(f"--corpus-dir: every file in {corpus_dir} is empty")
  return files


def _next_line_start(path: str, offset: int, size: int) -> int:
  """The first line start at or after `offset` (reading only as far as the newline)."""
  if offset <= 0 or offset >= size:
    return min(max(offset, 0), size)
  with open(path, "rb") as f:
    f.seek(offset - 1)
    while True:
      block = f.read(1 << 16)
      if not block:
        return size
      newline = block.find(b"\n")
      if newline >= 0:
        return offset + newline
      offset += len(block)


def split_work(files: List[str], num_parts: int) -> List[List[Span]]:
  """Cuts the concatenated files into `num_parts` byte ranges of about equal size."""
  sizes = [os.path.getsize(path) for path in files]
  total = sum(sizes)
  cuts = []  # (file index, offset) where part k begins, k = 1..num_parts-1
  for k in range(1, num_parts):
    target, base = total * k // num_parts, 0
    for i, size in enumerate(sizes):
      if target < base + size:
        cuts.append((i, _next_line_start(files[i], target - base, size)))
        break
      base += size
    else:
      cuts.append((len(files) - 1, sizes[-1]))
  bounds = [(0, 0)] + cuts + [(len(files) - 1, sizes[-1])]
  parts = []
  for (i0, o0), (i1, o1) in zip(bounds[:-1], bounds[1:]):
    spans = []
    for i in range(i0, i1 + 1):
      start = o0 if i == i0 else 0
      end = o1 if i == i1 else sizes[i]
      if end > start:
        spans.append(Span(files[i], start, end))
    parts.append(spans)
  return parts


def read_blocks(span: Span, block_size: int = 1 << 20) -> Iterator[bytes]:
  """The span in blocks of whole lines (a block grows to hold a line longer than it)."""
  with open(span.path, "rb") as f:
    f.seek(span.start)
    remaining, carry = span.end - span.start, b""
    while remaining > 0:
      # Reading as much as is carried over doubles the block for a long line (no
      # quadratic copying of a 50 MB line).
      data = f.read(min(max(block_size, len(carry)), remaining))
      if not data:
        break
      remaining -= len(data)
      data = carry + data
      cut = data.rfind(b"\n") + 1 if remaining > 0 else len(data)
      carry = data[cut:]
      if cut:
        yield data[:cut]
    if carry:
      yield carry


def read_lines(span: Span) -> Iterator[Tuple[bytes, int]]:
  """(line without its newline, bytes consumed) for each line of the span."""
  for block in read_blocks(span):
    lines = block.split(b"\n")
    last = lines.pop()  # b"" when the block ends with a newline
    for line in lines:
      yield line, len(line) + 1
    if last:
      yield last, len(last)


def decode(line: bytes) -> Tuple[str, int]:
  """UTF-8 text of a line, invalid bytes replaced by U+FFFD; and how many were replaced."""
  try:
    return line.decode("utf-8"), 0
  except UnicodeDecodeError:
    text = line.decode("utf-8", "replace")
    return text, text.count("\ufffd") - line.count("\ufffd".encode("utf-8"))
