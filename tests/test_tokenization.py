"""The fast tokenizer gives the ids of BERT's rules (the plain-Python reference) exactly."""

import functools
import json
import subprocess
import sys

import numpy as np
import pytest

from tests import reference_tokenizer as ref
from tools import tokenize as tokenize_command
from data_prep.tokenizer import Tokenizer, basic_words
from data_prep.vocab import load_vocab
from tests.helpers import ADVERSARIAL, code_point_lines, shared_path

BOTH_CASINGS = pytest.mark.parametrize("lower_case", [True, False])


@pytest.fixture(scope="module")
def vocab():
  return load_vocab(shared_path("vocab", "bert_uncased_vocab.txt"))


@functools.lru_cache(maxsize=None)
def fast_tokenizer(vocab, lower_case):
  return Tokenizer(vocab, lower_case)


def fast_ids(vocab, lines, lower_case=True):
  ids, offsets = fast_tokenizer(vocab, lower_case).batch_ids(lines)
  return [ids[offsets[i]:offsets[i + 1]].tolist() for i in range(len(lines))]


def reference_ids(vocab, lines, lower_case=True):
  tokenizer = ref.ReferenceTokenizer(vocab.ids, lower_case)
  return [tokenizer.ids(line) for line in lines]


@pytest.fixture(scope="module")
def corpus_words():
  """The shared corpus's lines and the reference's words of them, which neither casing
  changes: clean_text and space_cjk map each character on its own (so applying them to
  each distinct character gives a translation table), and everything after that (lower,
  accents, punctuation, WordPiece) works on one whitespace-separated word at a time. So
  the reference's ids of a line are those of its words in turn, each distinct word
  tokenized once: seconds for 25 MB, not minutes. The words: the distinct ones, each
  occurrence's index among them, and how many each line holds."""
  with open(shared_path("corpus", "english_corpus.txt"), encoding="utf-8") as f:
    text = f.read()
  table = {ord(ch): ref.space_cjk(ref.clean_text(ch)) for ch in set(text) - {"\n"}}
  translated = text.translate(table)
  occurring = translated.split()  # every line's words in turn ("\n" is whitespace)
  words = list(dict.fromkeys(occurring))
  index = {word: i for i, word in enumerate(words)}
  occurrences = np.fromiter(map(index.__getitem__, occurring), np.int64, len(occurring))
  per_line = np.array([len(line.split()) for line in translated.split("\n")])
  return text.split("\n"), words, occurrences, per_line


def first_line_that_differs(lines, got, got_lengths, want, want_lengths):
  got_ends, want_ends = np.cumsum(got_lengths), np.cumsum(want_lengths)
  for i, line in enumerate(lines):
    got_line = got[got_ends[i] - got_lengths[i]:got_ends[i]].tolist()
    if got_line != want[want_ends[i] - want_lengths[i]:want_ends[i]].tolist():
      return f"line {i + 1}: {line!r}: {got_line}"
  return "no line differs"


@pytest.mark.slow
@BOTH_CASINGS
def test_every_line_of_the_shared_corpus(vocab, corpus_words, lower_case):
  lines, words, occurrences, per_line = corpus_words
  tokenizer = ref.ReferenceTokenizer(vocab.ids, lower_case)
  word_ids = [tokenizer.ids(word) for word in words]
  word_lengths = np.array([len(ids) for ids in word_ids])
  word_starts = np.cumsum(word_lengths) - word_lengths
  flat = np.array([i for ids in word_ids for i in ids], np.int64)
  # The reference's ids of every line, concatenated: each occurrence's word's ids.
  lengths = word_lengths[occurrences]
  starts = np.cumsum(lengths) - lengths
  want = flat[np.repeat(word_starts[occurrences] - starts, lengths) +
              np.arange(lengths.sum())]
  want_lengths = np.bincount(np.repeat(np.arange(len(lines)), per_line), weights=lengths,
                             minlength=len(lines)).astype(np.int64)
  got, got_lengths = [], []
  for start in range(0, len(lines), 5000):
    ids, offsets = fast_tokenizer(vocab, lower_case).batch_ids(lines[start:start + 5000])
    got.append(ids)
    got_lengths.append(np.diff(offsets))
  got, got_lengths = np.concatenate(got), np.concatenate(got_lengths)
  # Equal lengths line by line and equal ids in all: every line's ids are equal.
  assert np.array_equal(got_lengths, want_lengths) and np.array_equal(got, want), (
      first_line_that_differs(lines, got, got_lengths, want, want_lengths))


@BOTH_CASINGS
def test_every_code_point_alone_and_inside_words(vocab, lower_case):
  lines = code_point_lines()
  got = fast_ids(vocab, lines, lower_case)
  want = reference_ids(vocab, lines, lower_case)
  for line, g, w in zip(lines, got, want):
    assert g == w, f"differs on {line[:80]!r}..."


@BOTH_CASINGS
def test_adversarial_text(vocab, lower_case):
  got = fast_ids(vocab, ADVERSARIAL, lower_case)
  want = reference_ids(vocab, ADVERSARIAL, lower_case)
  for text, g, w in zip(ADVERSARIAL, got, want):
    assert g == w, repr(text)


def test_rules_that_tell_bert_tools_apart(vocab):
  tokens = fast_tokenizer(vocab, True).tokenize
  assert tokens("a" * 200) != ["[UNK]"] and tokens("a" * 201) == ["[UNK]"]
  assert tokens("x" + "é" * 200) == ["[UNK]"]  # 201 characters after stripping accents
  assert tokens("[CLS]") == ["[", "cl", "##s", "]"]  # text, not the special token
  assert tokens("a\x00b\ufffdc") == tokens("abc")
  assert tokens("中文") == ["中", "文"]
  assert fast_tokenizer(vocab, False).tokenize("Café") != tokens("Café")


def test_basic_words_match_the_reference(vocab):
  for text in ADVERSARIAL:
    words = [w for w in basic_words(text) if w != "\ue000"]
    assert words == [w for w in ref.basic_tokenize(text) if len(w) <= ref.MAX_WORD_CHARS]


def test_tokenize_command(tmp_path, vocab, capsys):
  text = "Hello [CLS] World\r\nnaïve café\xff\n\nlast".encode("utf-8")
  text = text.replace("\xff".encode("utf-8"), b"\xff")  # one invalid byte
  (tmp_path / "in.txt").write_bytes(text)
  # In-process: a subprocess would spend most of the test importing TensorFlow.
  assert tokenize_command.main(["--vocab-file", vocab.path, "--input", str(tmp_path / "in.txt"),
                                "--output", str(tmp_path / "out.jsonl")]) == 0
  assert "1 invalid UTF-8 bytes" in capsys.readouterr().err
  rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
  lines = ["Hello [CLS] World\r", "naïve café\ufffd", "", "last"]
  assert [row["ids"] for row in rows] == reference_ids(vocab, lines)
  assert [row["tokens"] for row in rows] == [
      ref.ReferenceTokenizer(vocab.ids).tokenize(line) for line in lines]

  # The command line end to end, once, with a bad vocab: one line, exit 2.
  result = subprocess.run(
      [sys.executable, "-m", "tools.tokenize", "--vocab-file", str(tmp_path),
       "--input", str(tmp_path / "in.txt"), "--output", str(tmp_path / "o.jsonl")],
      capture_output=True, text=True, check=False)
  assert result.returncode == 2 and "is a directory" in result.stderr
  assert "Traceback" not in result.stderr and not (tmp_path / "o.jsonl").exists()
