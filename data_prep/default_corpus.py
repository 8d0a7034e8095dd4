"""The built-in default corpus: English prose from installed Python documentation.

Harvested, not shipped: the docstrings of the Python standard library and of the
packages requirements.txt installs are real English written by people, present on any
machine where the project runs. Files are parsed (never imported), in sorted order, so
the same installation always gives the same corpus. Cleaning keeps prose only: code,
doctest and markup lines go, wrapped lines are joined into one paragraph per line, and
the prose of each source file is a document (blank line between documents).
"""

import ast
import os
import re
import sys
import sysconfig
import warnings
from typing import Iterator, List

from util.files import atomic_write

# Packages requirements.txt installs, in a fixed order (after the standard library).
PACKAGES = ("numpy", "scipy", "sklearn", "matplotlib", "tensorflow", "tf_keras",
            "official", "tensorflow_text", "absl")
MIN_WORDS = 6
_CODE_HINTS = re.compile(r"(>>>|\.\.\. |::|[{}<>=|\\]|\b(def|import|lambda)\b|"
                         r"\w\(|\w\[|^[-*+#:@]|https?://)")
# reST / Markdown markup around words: roles, backticks, emphasis.
_MARKUP = re.compile(r":[a-z:]+:`~?([^`]*)`|``?([^`]*)``?|\*\*?([^*]+)\*\*?")
_SENTENCE_END = re.compile(r"[.!?]\)?$")


def source_files() -> Iterator[str]:
  """Python files of the standard library, then of PACKAGES; tests skipped."""
  stdlib = sysconfig.get_paths()["stdlib"]
  purelib = sysconfig.get_paths()["purelib"]
  roots = [stdlib] + [os.path.join(purelib, name) for name in PACKAGES]
  for root in roots:
    for folder, dirs, files in os.walk(root):
      dirs[:] = sorted(d for d in dirs if d not in ("site-packages", "test", "tests",
                                                      "__pycache__", "idlelib"))
      for name in sorted(files):
        if name.endswith(".py") and not name.startswith("test_"):
          yield os.path.join(folder, name)


def docstrings(path: str) -> Iterator[str]:
  try:
    with open(path, encoding="utf-8") as f:
      with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tree = ast.parse(f.read(), path)
  except (SyntaxError, UnicodeDecodeError, ValueError, OSError):
    return
  # Statements only: walking every expression node of a large file is the slow part.
  stack = [tree]
  while stack:
    node = stack.pop()
    text = ast.get_docstring(node)
    if text:
      yield text
    stack.extend(reversed([child for child in node.body if isinstance(child, _DEFINITIONS)]))


_DEFINITIONS = (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def prose_paragraphs(docstring: str) -> List[str]:
  """The paragraphs of a docstring that read as English sentences, one line each."""
  paragraphs = []
  for block in re.split(r"\n\s*\n", docstring):
    lines = [line.strip() for line in block.split("\n")]
    # Section underlines ("-----") and "name : type" headers are not prose.
    if any(set(line) <= set("-=~^") or " : " in line for line in lines):
      continue
    text = _MARKUP.sub(lambda m: next(g for g in m.groups() if g is not None),
                       " ".join(lines))
    words = text.split()
    if (len(words) < MIN_WORDS or _CODE_HINTS.search(text) or not _SENTENCE_END.search(text)
        or not text[0].isupper()):
      continue
    letters = sum(ch.isalpha() or ch == " " for ch in text)
    if letters < 0.85 * len(text):
      continue
    paragraphs.append(text)
  return paragraphs


def write_default_corpus(corpus_dir: str, max_bytes: int) -> int:
  """Writes up to `max_bytes` of harvested English to corpus_dir/python_docs.txt, a
  document per source file (one docstring is mostly one line, too short for
  two-segment examples)."""
  path = os.path.join(corpus_dir, "python_docs.txt")
  written, seen = 0, set()
  with atomic_write(path) as f:
    for source in source_files():
      paragraphs = []
      for docstring in docstrings(source):
        for paragraph in prose_paragraphs(docstring):
          if paragraph not in seen:  # inherited and copied docstrings repeat
            seen.add(paragraph)
            paragraphs.append(paragraph)
      if not paragraphs:
        continue
      document = "\n".join(paragraphs) + "\n\n"
      f.write(document)
      written += len(document.encode("utf-8"))
      if written >= max_bytes:
        return written
  if written == 0:
    raise ValueError(f"no documentation found under {sys.prefix} to build the default "
                     "corpus; pass --corpus-dir")
  return written
