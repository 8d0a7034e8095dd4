"""Corpus reading: listing the text files, splitting them between processes, streaming lines.

The corpus is never loaded: each process reads its own byte range of the (sorted)
files line by line. Ranges start and end at line starts, so every line belongs to
exactly one process and the split depends only on the files and the process count.
A gzip, bzip2 or xz file (known by its first bytes, whatever its name) is read
decompressed and whole by one process; any other file must be text.
"""

import bz2
import dataclasses
import gzip
import lzma
import os
import zlib
from typing import Callable, Iterator, List, Optional, Tuple

from util.cli import listed

# First bytes -> (name, opener of a decompressing file object over a binary file).
_COMPRESSIONS = ((b"\x1f\x8b", "gzip", lambda f: gzip.GzipFile(fileobj=f)),
                 (b"BZh", "bzip2", bz2.BZ2File), (b"\xfd7zXZ\x00", "xz", lzma.LZMAFile))
_SNIFF_BYTES = 1 << 16  # how much of each file is checked for being text
_MAX_INVALID_FRACTION = 0.1  # more invalid UTF-8 than this: binary, not text with typos


class CorpusError(ValueError):
  """A corpus that cannot be read."""


@dataclasses.dataclass(frozen=True)
class Span:
  """Bytes [start, end) of one file; start is 0 or just after a newline."""
  path: str
  start: int
  end: int


def list_files(corpus_dir: str, note: Optional[Callable[[str], None]] = None
               ) -> List[str]:
  """The corpus's files, sorted by name (hidden files skipped); each one text, or
  compressed text, or a CorpusError naming it. Subdirectories are not read (a build's
  own output may sit there); `note` is told their names."""
  if not os.path.exists(corpus_dir):
    raise CorpusError(f"--corpus-dir: {corpus_dir} does not exist")
  if not os.path.isdir(corpus_dir):
    raise CorpusError(f"--corpus-dir: {corpus_dir} is not a directory (expected a "
                      "directory of text files)")
  names = [name for name in sorted(os.listdir(corpus_dir)) if not name.startswith(".")]
  files = [os.path.join(corpus_dir, name) for name in names
           if os.path.isfile(os.path.join(corpus_dir, name))]
  folders = [name + "/" for name in names if os.path.isdir(os.path.join(corpus_dir, name))]
  unread = (f"its subdirectories ({listed(folders)}) are not read: put their files in "
            f"{corpus_dir} itself to use them") if folders else ""
  if not files:
    raise CorpusError(f"--corpus-dir: {corpus_dir} holds no text files"
                      + (f"; {unread}" if unread else ""))
  if unread and note is not None:
    note(f"note: {corpus_dir}: {unread}")
  if not any(os.path.getsize(path) for path in files):
    raise CorpusError(f"--corpus-dir: every file in {corpus_dir} is empty")
  for path in files:
    check_text(path)
  return files


def compression(path: str) -> Tuple[Optional[str], Optional[Callable]]:
  """("gzip", "bzip2" or "xz", the opener of its _COMPRESSIONS) when the file starts as
  those do, else (None, None)."""
  with open(path, "rb") as f:
    start = f.read(6)
  return next(((name, opener) for magic, name, opener in _COMPRESSIONS
               if start.startswith(magic)), (None, None))


def check_text(path: str):
  """Refuses a file whose start (decompressed, if compressed) is not UTF-8 text."""
  sample = next(iter(read_blocks(Span(path, 0, os.path.getsize(path)), _SNIFF_BYTES,
                                 whole_lines=False)), (b"", 0))[0][:_SNIFF_BYTES]
  kind, _ = compression(path)
  what = f"{kind}-compressed file" if kind else "file"
  expected = "expected UTF-8 text, or gzip/bzip2/xz-compressed UTF-8 text"
  if b"\x00" in sample:
    raise CorpusError(f"{path}: not text (this {what} holds NUL bytes); {expected}")
  invalid = decode(sample)[1]
  if invalid > _MAX_INVALID_FRACTION * len(sample):
    raise CorpusError(f"{path}: not text ({invalid} of the first {len(sample)} bytes of "
                      f"this {what} are not UTF-8); {expected}")


def _next_line_start(path: str, offset: int, size: int) -> int:
  """The first line start at or after `offset` (reading only as far as the newline)."""
  if offset <= 0 or offset >= size:
    return min(max(offset, 0), size)
  if compression(path)[0]:
    return size  # a compressed file cannot be entered midway: its whole goes before
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


def read_blocks(span: Span, block_size: int = 1 << 20,
                whole_lines: bool = True) -> Iterator[Tuple[bytes, int]]:
  """The span in blocks of whole lines (a block grows to hold a line longer than it),
  each with the number of the file's bytes read for it (for progress: compressed bytes
  of a compressed file). A compressed file is always read whole, decompressed."""
  kind, opener = compression(span.path)
  with open(span.path, "rb") as raw:
    raw.seek(0 if opener else span.start)
    stream = opener(raw) if opener else raw
    remaining = None if opener else span.end - span.start
    carry, position = b"", raw.tell()
    while remaining is None or remaining > 0:
      # Reading as much as is carried over doubles the block for a long line (no
      # quadratic copying of a 50 MB line).
      size = max(block_size, len(carry))
      try:
        data = stream.read(size if remaining is None else min(size, remaining))
      except (EOFError, OSError, lzma.LZMAError, zlib.error) as e:
        if not opener:
          raise
        raise CorpusError(f"{span.path}: corrupt {kind} data ({e})") from None
      if not data:
        break
      if remaining is not None:
        remaining -= len(data)
      data = carry + data
      cut = data.rfind(b"\n") + 1 if whole_lines else len(data)
      carry = data[cut:]
      if cut:
        consumed, position = raw.tell() - position, raw.tell()
        yield data[:cut], consumed
    if carry:
      yield carry, raw.tell() - position


def read_texts(corpus_dir: str) -> Iterator[str]:
  """The whole corpus streamed, a block of whole lines at a time, decoded."""
  for path in list_files(corpus_dir):
    for block, _ in read_blocks(Span(path, 0, os.path.getsize(path))):
      yield decode(block)[0]


def lines_before(span: Span) -> int:
  """How many lines of its file come before the span (a compressed file's span starts
  at its beginning)."""
  counted, remaining = 0, span.start
  with open(span.path, "rb") as f:
    while remaining > 0:
      block = f.read(min(remaining, 1 << 20))
      if not block:
        break
      counted += block.count(b"\n")
      remaining -= len(block)
  return counted


def decode(line: bytes) -> Tuple[str, int]:
  """UTF-8 text of a line, invalid bytes replaced by U+FFFD; and how many were replaced."""
  try:
    return line.decode("utf-8"), 0
  except UnicodeDecodeError:
    text = line.decode("utf-8", "replace")
    return text, text.count("\ufffd") - line.count("\ufffd".encode("utf-8"))
